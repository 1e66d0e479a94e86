package console

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/node/admin"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

const (
	bootToken     = "bootstrap-token-for-console-tests"
	clusterSecret = "cluster-secret-for-console-tests"
)

// stubSpend answers SpendReport with fixed rows (the node serves the real
// one); stubCluster answers Status.
type stubSpend struct {
	pb.UnimplementedSpendServiceServer
}

func (stubSpend) SpendReport(_ context.Context, req *pb.SpendReportRequest) (*pb.SpendReportResponse, error) {
	return &pb.SpendReportResponse{
		Rows: []*pb.SpendReportRow{
			{Group: "gpt-4o", Requests: 3, PromptTokens: 30, CompletionTokens: 12, CostNanos: 1_250_000},
			{Group: "=cmd()", Requests: 1, CostNanos: 2_000_000_123},
		},
		Total: &pb.SpendReportRow{Group: "total", Requests: 4, PromptTokens: 30, CompletionTokens: 12, CostNanos: 2_001_250_123},
	}, nil
}

type stubCluster struct {
	pb.UnimplementedClusterServiceServer
}

func (stubCluster) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return &pb.StatusResponse{}, nil
}

// env is a console in front of a real admin gRPC server on a real Raft
// store, served on loopback.
type env struct {
	store  *raftstore.Store
	admin  *grpc.ClientConn
	srv    *Server
	url    string
	tokens map[string]string // role → token
}

func openStore(t *testing.T) *raftstore.Store {
	t.Helper()
	st, err := raftstore.Open(raftstore.Config{Dir: t.TempDir(), NodeID: "n1", BindAddr: "127.0.0.1:0", Bootstrap: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LogLevel: "error",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// startAdmin serves the admin API of store on loopback and returns a
// connection to it; maxEnded bounds the ended console sessions (0: the
// default).
func startAdmin(t *testing.T, store *raftstore.Store, maxEnded int) *grpc.ClientConn {
	t.Helper()
	adm := admin.New(admin.Config{Store: store, BootstrapToken: bootToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxEndedConsoleSessions: maxEnded})
	g := grpc.NewServer(grpc.UnaryInterceptor(adm.UnaryInterceptor()), grpc.StreamInterceptor(adm.StreamInterceptor()))
	adm.Register(g)
	pb.RegisterSpendServiceServer(g, stubSpend{})
	pb.RegisterClusterServiceServer(g, stubCluster{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// startEnv starts a console on loopback; mod, when not nil, adjusts its
// Config (url is where it is served).
func startEnv(t *testing.T, mod func(url string, c *Config)) *env {
	t.Helper()
	return startEnvBounded(t, 0, mod)
}

// startEnvBounded is startEnv with the cluster's ended console sessions
// bounded to maxEnded (0: the default), by the admin API and the console.
func startEnvBounded(t *testing.T, maxEnded int, mod func(url string, c *Config)) *env {
	t.Helper()
	e := &env{store: openStore(t), tokens: map[string]string{raftstore.RoleAdmin: bootToken}}
	ctx := bootCtx(t)
	if _, err := e.store.Apply(ctx, &pb.Command{Op: &pb.Command_SetClusterSecret{
		SetClusterSecret: &pb.SetClusterSecretCommand{Secret: clusterSecret}}}); err != nil {
		t.Fatal(err)
	}
	e.admin = startAdmin(t, e.store, maxEnded)
	for _, role := range []string{raftstore.RoleOperator, raftstore.RoleViewer} {
		u, err := pb.NewUserServiceClient(e.admin).CreateUser(ctx, &pb.CreateUserRequest{Name: role + "-user", Role: role})
		if err != nil {
			t.Fatal(err)
		}
		e.tokens[role] = u.GetToken()
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.srv.ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	e.url = hs.URL
	cfg := Config{NodeID: "n1", Admin: e.admin, ClusterSecret: func() string { return e.store.State().ClusterSecret() },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if maxEnded > 0 {
		cfg.SessionsFull = func() bool { return e.store.State().EndedConsoleSessionsFull(maxEnded, time.Now()) }
	}
	if mod != nil {
		mod(e.url, &cfg)
	}
	var err error
	if e.srv, err = New(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func bootCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+bootToken)
}

// client is a browser: a cookie jar and the CSRF token of its session.
type client struct {
	t    *testing.T
	e    *env
	http *http.Client
	csrf string
}

func (e *env) client(t *testing.T) *client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, e: e, http: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
}

// login logs in with the token of role and keeps the CSRF token.
func (e *env) login(t *testing.T, role string) *client {
	t.Helper()
	c := e.client(t)
	code, body := c.do("POST", "/api/login", `{"token":"`+e.tokens[role]+`"}`, nil)
	if code != http.StatusOK {
		t.Fatalf("login as %s: %d %s", role, code, body)
	}
	var s sessionBody
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	c.csrf = s.CSRF
	return c
}

// do sends a request (with the CSRF token on a POST unless hdr says
// otherwise) and returns the status and body.
func (c *client) do(method, path, body string, hdr map[string]string) (int, string) {
	c.t.Helper()
	resp := c.raw(method, path, body, hdr)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func (c *client) raw(method, path, body string, hdr map[string]string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.e.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if method == "POST" && c.csrf != "" {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// rpc calls the bridge.
func (c *client) rpc(method, body string) (int, string) {
	c.t.Helper()
	return c.do("POST", "/api/rpc/"+method, body, nil)
}

// wantError checks an API error's status and code, and that its message
// contains each of parts.
func wantError(t *testing.T, code int, body string, wantCode int, wantName string, parts ...string) {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != wantCode || e.Error.Code != wantName {
		t.Fatalf("got %d %s, want %d with code %s", code, body, wantCode, wantName)
	}
	for _, p := range parts {
		if !strings.Contains(e.Error.Message, p) {
			t.Errorf("error message %q does not contain %q", e.Error.Message, p)
		}
	}
}
