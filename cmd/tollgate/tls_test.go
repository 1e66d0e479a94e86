package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tlsCmd runs runTLS and returns its exit code, stdout and stderr.
func tlsCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runTLS(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("%s holds no CERTIFICATE PEM block", file)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	return cert
}

func fileMode(t *testing.T, file string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestTLSCAAndCert(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := tlsCmd(t, "ca", "--dir", dir, "--name", "Test cluster CA", "--days", "30")
	if code != 0 {
		t.Fatalf("tls ca: exit %d, stderr %q", code, errOut)
	}
	caFile, caKeyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	for _, f := range []string{caFile, caKeyFile} {
		if !strings.Contains(out, f) {
			t.Errorf("tls ca output %q does not name %s", out, f)
		}
	}
	ca := readCert(t, caFile)
	if !ca.IsCA || ca.Subject.CommonName != "Test cluster CA" {
		t.Errorf("CA IsCA=%v CommonName=%q", ca.IsCA, ca.Subject.CommonName)
	}
	if d := time.Until(ca.NotAfter); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Errorf("CA expires in %v, want about 30 days", d)
	}
	if m := fileMode(t, caKeyFile); m != 0o600 {
		t.Errorf("%s mode %v, want 0600", caKeyFile, m)
	}

	code, out, errOut = tlsCmd(t, "cert", "--dir", dir, "--name", "node-1",
		"--host", "node-1.internal,10.0.0.11", "--host", " ::1 ", "--host", "localhost")
	if code != 0 {
		t.Fatalf("tls cert: exit %d, stderr %q", code, errOut)
	}
	certFile, keyFile := filepath.Join(dir, "node-1.pem"), filepath.Join(dir, "node-1-key.pem")
	wantHint := "--tls-cert " + certFile + " --tls-key " + keyFile + " --tls-ca " + caFile
	if !strings.Contains(out, wantHint) {
		t.Errorf("tls cert output %q lacks the hint %q", out, wantHint)
	}
	if m := fileMode(t, keyFile); m != 0o600 {
		t.Errorf("%s mode %v, want 0600", keyFile, m)
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatalf("certificate and key do not pair: %v", err)
	}

	leaf := readCert(t, certFile)
	if leaf.Subject.CommonName != "node-1" {
		t.Errorf("CommonName=%q, want node-1", leaf.Subject.CommonName)
	}
	if got, want := strings.Join(leaf.DNSNames, " "), "node-1 localhost node-1.internal"; got != want {
		t.Errorf("DNSNames %q, want %q", got, want)
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if got, want := strings.Join(ips, " "), "127.0.0.1 10.0.0.11 ::1"; got != want {
		t.Errorf("IPAddresses %q, want %q", got, want)
	}
	if leaf.NotAfter.After(ca.NotAfter) {
		t.Errorf("certificate expires %v, after the CA's %v", leaf.NotAfter, ca.NotAfter)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		for _, host := range []string{"node-1", "localhost", "node-1.internal", "127.0.0.1", "10.0.0.11", "::1"} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("verify %s for usage %v: %v", host, usage, err)
			}
		}
	}
}

func TestTLSCertExplicitCA(t *testing.T) {
	caDir, outDir := t.TempDir(), filepath.Join(t.TempDir(), "new")
	if code, _, errOut := tlsCmd(t, "ca", "--dir", caDir); code != 0 {
		t.Fatalf("tls ca: exit %d, stderr %q", code, errOut)
	}
	caFile := filepath.Join(caDir, "ca.pem")
	code, out, errOut := tlsCmd(t, "cert", "--name", "n2", "--dir", outDir,
		"--ca", caFile, "--ca-key", filepath.Join(caDir, "ca-key.pem"))
	if code != 0 {
		t.Fatalf("tls cert: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "--tls-ca "+caFile) {
		t.Errorf("output %q does not point --tls-ca at %s", out, caFile)
	}
	if readCert(t, caFile).Subject.CommonName != "Tollgate cluster CA" {
		t.Error("default CA name not used")
	}
	if _, err := os.Stat(filepath.Join(outDir, "n2.pem")); err != nil {
		t.Error(err)
	}
}

func TestTLSRefusesOverwrite(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := tlsCmd(t, "ca", "--dir", dir); code != 0 {
		t.Fatalf("tls ca: exit %d, stderr %q", code, errOut)
	}
	caBefore, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := tlsCmd(t, "ca", "--dir", dir)
	if code != 1 || !strings.Contains(errOut, "already exist") || !strings.Contains(errOut, "--dir") {
		t.Errorf("second tls ca: exit %d, stderr %q; want 1 and a refusal", code, errOut)
	}
	if caAfter, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); !bytes.Equal(caBefore, caAfter) {
		t.Error("ca.pem was overwritten")
	}

	if code, _, errOut := tlsCmd(t, "cert", "--dir", dir, "--name", "n1"); code != 0 {
		t.Fatalf("tls cert: exit %d, stderr %q", code, errOut)
	}
	certBefore, err := os.ReadFile(filepath.Join(dir, "n1.pem"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut = tlsCmd(t, "cert", "--dir", dir, "--name", "n1")
	if code != 1 || !strings.Contains(errOut, "already exist") {
		t.Errorf("second tls cert: exit %d, stderr %q; want 1 and a refusal", code, errOut)
	}
	if certAfter, _ := os.ReadFile(filepath.Join(dir, "n1.pem")); !bytes.Equal(certBefore, certAfter) {
		t.Error("n1.pem was overwritten")
	}

	// Only the key exists: still refused, and nothing is written.
	if err := os.Remove(filepath.Join(dir, "n1.pem")); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := tlsCmd(t, "cert", "--dir", dir, "--name", "n1"); code != 1 {
		t.Errorf("tls cert over an existing key: exit %d, want 1", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "n1.pem")); err == nil {
		t.Error("n1.pem was written although n1-key.pem exists")
	}
}

func TestTLSErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no command", nil, 2, "Usage: tollgate tls"},
		{"unknown command", []string{"bogus"}, 2, `unknown command "bogus"`},
		{"help", []string{"-h"}, 0, "Usage: tollgate tls"},
		{"ca help", []string{"ca", "-h"}, 0, "Usage: tollgate tls ca"},
		{"cert help", []string{"cert", "-h"}, 0, "--ca-key"},
		{"cert without name", []string{"cert", "--dir", dir}, 2, "--name is required"},
		{"cert named ca", []string{"cert", "--dir", dir, "--name", "ca"}, 2, "clash"},
		{"cert name with slash", []string{"cert", "--dir", dir, "--name", "../x"}, 2, "plain name"},
		{"unknown flag", []string{"ca", "--bogus"}, 2, "bogus"},
		{"extra argument", []string{"ca", "--dir", dir, "extra"}, 2, `unexpected argument "extra"`},
		{"zero days", []string{"ca", "--dir", dir, "--days", "0"}, 2, "--days"},
		{"cert zero days", []string{"cert", "--dir", dir, "--name", "n", "--days", "0"}, 2, "--days"},
		{"cert without CA", []string{"cert", "--dir", dir, "--name", "n"}, 1, "tollgate tls ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := tlsCmd(t, tc.args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantStderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, tc.wantCode, tc.wantStderr)
			}
			if tc.wantCode != 0 && !strings.Contains(errOut, "tollgate tls") {
				t.Errorf("stderr %q does not name tollgate tls", errOut)
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("failed commands left files: %v", entries)
	}
}

func TestTLSCertWrongKey(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if code, _, errOut := tlsCmd(t, "ca", "--dir", d); code != 0 {
			t.Fatalf("tls ca: exit %d, stderr %q", code, errOut)
		}
	}
	code, _, errOut := tlsCmd(t, "cert", "--dir", a, "--name", "n", "--ca-key", filepath.Join(b, "ca-key.pem"))
	if code != 1 || !strings.Contains(errOut, "does not match") {
		t.Errorf("exit %d, stderr %q; want 1 and a key mismatch", code, errOut)
	}
}

// --host takes host names and IP addresses (IPv6 also in brackets), not
// addresses with ports or URLs.
func TestTLSCertHosts(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := tlsCmd(t, "ca", "--dir", dir); code != 0 {
		t.Fatalf("ca: %d %s", code, errOut)
	}
	for _, bad := range []string{"10.0.0.1:4100", "https://n1.internal", "n1.internal:443"} {
		if code, _, errOut := tlsCmd(t, "cert", "--dir", dir, "--name", "bad", "--host", bad); code != 2 || !strings.Contains(errOut, "not a host name or IP address") {
			t.Errorf("--host %s: exit %d, %s", bad, code, errOut)
		}
	}
	if code, _, errOut := tlsCmd(t, "cert", "--dir", dir, "--name", "n1", "--host", "[::1],n1.internal"); code != 0 {
		t.Fatalf("cert: %d %s", code, errOut)
	}
	c := readCert(t, filepath.Join(dir, "n1.pem"))
	if err := c.VerifyHostname("::1"); err != nil {
		t.Errorf("[::1] is not in the certificate as an IP address: %v (DNS names %v)", err, c.DNSNames)
	}
	if slices.Contains(c.DNSNames, "[::1]") {
		t.Errorf("DNS names %v hold the bracketed form", c.DNSNames)
	}
}
