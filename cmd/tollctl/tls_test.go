package main

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/node/certs"
	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// startTLSFake serves the fake admin API over TLS with a certificate of a
// fresh CA, and returns the fake and the CA's file.
func startTLSFake(t *testing.T) (*fake, string) {
	t.Helper()
	ca, err := certs.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	pair, err := ca.IssueTLS("node", []string{"127.0.0.1", "node.internal"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveFake(t, tls.NewListener(lis, &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"}})), caFile
}

func TestTLS(t *testing.T) {
	f, caFile := startTLSFake(t)
	if r := f.run(t, "--tls-ca", caFile, "key", "list"); r.code != 0 {
		t.Fatalf("--tls-ca: exit %d stderr %q", r.code, r.stderr)
	}
	t.Setenv(envTLSCA, caFile)
	if r := f.run(t, "key", "list"); r.code != 0 {
		t.Fatalf("%s: exit %d stderr %q", envTLSCA, r.code, r.stderr)
	}
	if r := f.run(t, "--tls-server-name", "node.internal", "key", "list"); r.code != 0 {
		t.Fatalf("--tls-server-name: exit %d stderr %q", r.code, r.stderr)
	}
	t.Setenv(envTLSCA, "")

	// Mistakes fail at once (no retries until --timeout) with a hint.
	_, otherCA := startTLSFake(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"plain text to a TLS node", nil, "--tls-ca"},
		{"another CA", []string{"--tls-ca", otherCA}, "certificate"},
		{"system roots", []string{"--tls"}, "certificate"},
		{"wrong server name", []string{"--tls-ca", caFile, "--tls-server-name", "other.internal"}, "--tls-server-name"},
	} {
		start := time.Now()
		r := f.run(t, append(append([]string{"--timeout", "5s"}, c.args...), "key", "list")...)
		if r.code != 1 || !strings.Contains(r.stderr, "hint:") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d stderr %q; want a hint naming %s", c.name, r.code, r.stderr, c.want)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: took %v; a TLS mistake is not worth retrying", c.name, d)
		}
	}

	// TLS to a node that does not serve it.
	plain := startFake(t)
	start := time.Now()
	r := plain.run(t, "--timeout", "5s", "--tls-ca", caFile, "key", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "does not serve TLS") {
		t.Errorf("TLS to a plain node: exit %d stderr %q", r.code, r.stderr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("TLS to a plain node: took %v", d)
	}

	if r := f.run(t, "--tls-ca", filepath.Join(t.TempDir(), "missing.pem"), "key", "list"); r.code != 1 || !strings.Contains(r.stderr, "read --tls-ca") {
		t.Errorf("missing CA file: exit %d stderr %q", r.code, r.stderr)
	}
	if r := f.run(t, "--tls-server-name", "x", "key", "list"); r.code != 2 {
		t.Errorf("--tls-server-name alone: exit %d stderr %q", r.code, r.stderr)
	}
}

// A node that fails to reach the leader passes the error on, with TLS
// words in it; that is not this client's TLS mismatch, and is retried.
func TestForwardedTLSErrorIsRetried(t *testing.T) {
	f, caFile := startTLSFake(t)
	f.inject.failNext(tollgatev1.KeyService_ListKeys_FullMethodName, status.Error(codes.Unavailable,
		`forwarding to the leader at 10.0.0.2:4100: connection error: desc = "transport: authentication handshake failed: x509: certificate signed by unknown authority"`))
	r := f.run(t, "--tls-ca", caFile, "key", "list")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if n := f.inject.count(tollgatev1.KeyService_ListKeys_FullMethodName); n != 2 {
		t.Errorf("%d calls, want 2 (one retry)", n)
	}
}
