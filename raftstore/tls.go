package raftstore

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
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

// handshakeTimeout bounds an accepted connection's TLS handshake.
var handshakeTimeout = 10 * time.Second

// Accept returns the next connection. The handshake runs on the
// connection's first read or write, in Raft's handler goroutine for that
// connection, so one peer's slow handshake holds up no other; it must end
// within handshakeTimeout, and a peer without a valid certificate, or one
// that stays silent, is dropped.
func (t *tlsStreamLayer) Accept() (net.Conn, error) {
	c, err := t.ln.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: c.(*tls.Conn)}, nil
}

// handshakeConn completes the TLS handshake, under a deadline, before its
// first read or write.
type handshakeConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		_ = c.Conn.SetDeadline(time.Now().Add(handshakeTimeout))
		if c.err = c.Conn.Handshake(); c.err == nil {
			c.err = c.Conn.SetDeadline(time.Time{})
		}
		if c.err != nil {
			_ = c.Conn.Close()
		}
	})
	return c.err
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *handshakeConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (t *tlsStreamLayer) Close() error { return t.ln.Close() }

func (t *tlsStreamLayer) Addr() net.Addr { return t.advertise }

// Dial connects to a peer and completes the handshake within timeout.
func (t *tlsStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: t.client}
	return d.Dial("tcp", string(addr))
}
