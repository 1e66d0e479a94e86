package admin

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

const testBootstrapToken = "bootstrap-token-for-tests"

// openStore opens a real single-node Raft store and waits for it to lead.
func openStore(t testing.TB) *raftstore.Store {
	t.Helper()
	st, err := raftstore.Open(raftstore.Config{
		Dir:                t.TempDir(),
		NodeID:             "n1",
		BindAddr:           "127.0.0.1:0",
		Bootstrap:          true,
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		LogLevel:           "error",
		HeartbeatTimeout:   100 * time.Millisecond,
		ElectionTimeout:    100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("open raft store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.WaitReady(ctx); err != nil {
		t.Fatalf("raft store not ready: %v", err)
	}
	return st
}

// bearer sends a fixed admin token on every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

type testEnv struct {
	store  Store
	addr   string
	logs   *syncBuffer
	keys   pb.KeyServiceClient
	models pb.ModelServiceClient
	creds  pb.CredentialServiceClient
	teams  pb.TeamServiceClient
}

// startServer serves the admin API for store on a real gRPC server and
// returns clients that authenticate with the bootstrap token.
func startServer(t *testing.T, store Store) *testEnv {
	t.Helper()
	return startServerWith(t, Config{Store: store}, nil)
}

// startServerWith is startServer with more of the Config (the bootstrap
// token and logger are filled in) and, unless now is nil, a fixed clock.
func startServerWith(t *testing.T, cfg Config, now func() time.Time) *testEnv {
	t.Helper()
	store := cfg.Store
	logs := &syncBuffer{}
	cfg.BootstrapToken = testBootstrapToken
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := New(cfg)
	if now != nil {
		srv.now = now // before Serve: no call can race with it
	}
	g := grpc.NewServer(
		grpc.UnaryInterceptor(srv.UnaryInterceptor()),
		grpc.StreamInterceptor(srv.StreamInterceptor()),
	)
	srv.Register(g)
	env := &testEnv{store: store, addr: serve(t, g), logs: logs}
	conn := dial(t, env.addr, testBootstrapToken)
	env.keys = pb.NewKeyServiceClient(conn)
	env.models = pb.NewModelServiceClient(conn)
	env.creds = pb.NewCredentialServiceClient(conn)
	env.teams = pb.NewTeamServiceClient(conn)
	return env
}

// serve serves g on a loopback port until the test ends.
func serve(t *testing.T, g *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}

func dial(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantCode fails the test unless err has gRPC code want.
func wantCode(t *testing.T, err error, want codes.Code) *status.Status {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != want {
		t.Fatalf("got %v (%v), want code %v", st.Code(), err, want)
	}
	return st
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// incoming returns ctx with an incoming "authorization" metadata value
// (none when auth is empty).
func incoming(ctx context.Context, auth string) context.Context {
	if auth == "" {
		return metadata.NewIncomingContext(ctx, metadata.MD{})
	}
	return metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", auth))
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
