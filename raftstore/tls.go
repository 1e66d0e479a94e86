package raftstore

import (
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tlsStreamLayer carries Raft's RPCs over mutually authenticated TLS: the
// listener demands a client certificate, and dials present one.
type tlsStreamLayer struct {
	ln        net.Listener // a tls.Listener
	advertise net.Addr
	client    *tls.Config
}

func newTLSStreamLayer(bind string, advertise net.Addr, server, client *tls.Config) (*tlsStreamLayer, error) {
	if server == nil || client == nil {
		return nil, errors.New("raftstore: TLS needs both a server and a client configuration")
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		_ = ln.Close()
		return nil, errors.New("raftstore: the local bind address is not advertisable")
	}
	return &tlsStreamLayer{ln: tls.NewListener(ln, server), advertise: advertise, client: client}, nil
}

// Accept returns the next connection. The handshake runs on the
// connection's first read in Raft's handler goroutine, so one peer's slow
// handshake holds up no other; a peer without a valid certificate fails it
// there and is dropped.
func (t *tlsStreamLayer) Accept() (net.Conn, error) { return t.ln.Accept() }

func (t *tlsStreamLayer) Close() error { return t.ln.Close() }

func (t *tlsStreamLayer) Addr() net.Addr { return t.advertise }

// Dial connects to a peer and completes the handshake within timeout.
func (t *tlsStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: t.client}
	return d.Dial("tcp", string(addr))
}
