package raftstore

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/tollgate/tollgate/node/certs"
)

func tlsPair(t *testing.T, ca *certs.CA) tls.Certificate {
	t.Helper()
	p, err := ca.IssueTLS("n", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An accepted connection that never completes its handshake is closed
// after handshakeTimeout; one that does carries Raft's bytes.
func TestTLSStreamLayerHandshakeDeadline(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 300 * time.Millisecond
	t.Cleanup(func() { handshakeTimeout = old })
	ca, err := certs.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	pair := tlsPair(t, ca)
	server := &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	client := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "127.0.0.1"}
	layer, err := newTLSStreamLayer("127.0.0.1:0", nil, server, client)
	if err != nil {
		t.Fatal(err)
	}
	defer layer.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := layer.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	// A silent peer: the server side's first read fails at the deadline.
	silent, err := net.Dial("tcp", layer.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	sc := <-accepted
	start := time.Now()
	readErr := make(chan error, 1)
	go func() {
		_, err := sc.Read(make([]byte, 1))
		readErr <- err
	}()
	select {
	case err := <-readErr:
		if err == nil || time.Since(start) > 5*time.Second {
			t.Errorf("silent peer: read err %v after %v", err, time.Since(start))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a silent peer's connection is still open after 10s")
	}
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the silent peer's connection was not closed: %v", err)
	}

	// A member: dial (the handshake needs the accepted side reading, as
	// Raft's handler does), write, and the accepted side reads it.
	dialErr := make(chan error, 1)
	go func() {
		c, err := layer.Dial(raft.ServerAddress(layer.Addr().String()), 5*time.Second)
		if err == nil {
			_, err = c.Write([]byte("rpc"))
			t.Cleanup(func() { c.Close() })
		}
		dialErr <- err
	}()
	mc := <-accepted
	_ = mc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 3)
	if _, err := io.ReadFull(mc, buf); err != nil || string(buf) != "rpc" {
		t.Errorf("member connection: %q, %v", buf, err)
	}
	if err := <-dialErr; err != nil {
		t.Errorf("member dial: %v", err)
	}
}
