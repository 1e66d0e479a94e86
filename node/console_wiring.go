package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tollgate/tollgate/node/console"
	"github.com/tollgate/tollgate/raftstore"
)

// ConsoleConfig configures the web console.
type ConsoleConfig struct {
	// Addr is the console's listen address; empty: no console.
	Addr string
	// Optional runs the node without a console when Addr cannot be bound
	// (a default address that several nodes on one machine would share),
	// with a warning; otherwise New fails.
	Optional bool
	// OIDC turns on single sign-on; nil: off.
	OIDC *console.OIDCConfig

	// running is the node's console once New started it (kept here so
	// that the console's wiring stays in this file).
	running *consoleServer
}

// consoleServer is the running console: its HTTP server and listener,
// and the in-memory connection to this node's admin gRPC server.
type consoleServer struct {
	ln    net.Listener
	srv   *http.Server
	admin *bufconn.Listener
	conn  *grpc.ClientConn
}

// openConsole binds the console's listener and starts serving it (as
// gossip, it runs from New on; Close stops it). The console calls the
// admin API through an in-memory listener that the node's own admin gRPC
// server serves, so every call passes the same interceptors (auth, roles,
// team scope, forwarding to the leader, audit) as a tollctl call.
func (n *Node) openConsole() error {
	cfg := n.cfg.Console
	if cfg.Addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil && cfg.Optional {
		n.log.Warn("no web console: its address cannot be bound; set --console-addr", "addr", cfg.Addr, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("console listen: %w", err)
	}
	if n.tls != nil {
		ln = tls.NewListener(ln, n.tls.data)
	}
	c := &consoleServer{ln: ln, admin: bufconn.Listen(1 << 20)}
	c.conn, err = grpc.NewClient("passthrough:///admin", grpc.WithTransportCredentials(n.peers.creds),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return c.admin.DialContext(ctx) }))
	if err == nil {
		err = n.startConsole(c, cfg)
	}
	if err != nil {
		_ = ln.Close()
		return err
	}
	n.cfg.Console.running = c
	return nil
}

func (n *Node) startConsole(c *consoleServer, cfg ConsoleConfig) error {
	if o := cfg.OIDC; o != nil && o.RedirectURL == "" {
		oc := *o
		oc.RedirectURL = consoleURL(c.ln.Addr().String(), n.tls != nil) + "/api/oidc/callback"
		cfg.OIDC = &oc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // an OIDC issuer's discovery
	defer cancel()
	h, err := console.New(ctx, console.Config{
		NodeID: n.cfg.NodeID, Admin: c.conn, Secure: n.tls != nil, OIDC: cfg.OIDC, Logger: n.log,
		ClusterSecret: func() string { return n.store.State().ClusterSecret() },
		SessionsFull: func() bool {
			return n.store.State().EndedConsoleSessionsFull(raftstore.MaxEndedConsoleSessions, time.Now())
		},
	})
	if err != nil {
		_ = c.conn.Close()
		return fmt.Errorf("console: %w", err)
	}
	c.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 5 * time.Minute,
		ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)}
	go func() { _ = n.grpcSrv.Serve(c.admin) }() // ends when the admin server stops
	go func() {
		if err := c.srv.Serve(c.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("console server stopped", "err", err)
		}
	}()
	n.log.Info("console listening", "addr", c.ln.Addr().String())
	return nil
}

// consoleURL is the console's URL on addr: https with TLS, localhost for
// an unspecified host.
func consoleURL(addr string, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && (host == "" || (ip != nil && ip.IsUnspecified())) {
		addr = net.JoinHostPort("localhost", port)
	}
	return scheme + "://" + addr
}

// ConsoleAddr returns the console's bound address ("" without a console).
func (n *Node) ConsoleAddr() string {
	if c := n.cfg.Console.running; c != nil {
		return c.ln.Addr().String()
	}
	return ""
}

// closeHTTP closes the data plane's HTTP server and the console.
func (n *Node) closeHTTP() {
	_ = n.httpSrv.Close()
	if c := n.cfg.Console.running; c != nil {
		_ = c.srv.Close()
		_ = c.conn.Close()
	}
}
