package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/ratelimit"
)

// env is a gateway over a real single-node Raft store, in front of a real
// MCP server (the Go SDK's, on 127.0.0.1), with the ledger records it
// writes.
type env struct {
	t        testing.TB
	store    *raftstore.Store
	gw       *Gateway
	url      string // the gateway's base URL
	upstream *testUpstream

	mu      sync.Mutex
	records []*pb.SpendRecord
}

// testUpstream is an MCP server with tools echo, fail and slow (which
// reports progress and then waits until it is cancelled).
type testUpstream struct {
	url       string
	srv       *httptest.Server
	cancelled chan struct{} // a slow call saw its cancellation
	started   chan struct{} // a slow call started
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

func newTestUpstream(t testing.TB) *testUpstream { return newTestUpstreamServing(t, bothProtocols) }

// newTestUpstreamServing is newTestUpstream with its MCP server served by
// the handler serve returns.
func newTestUpstreamServing(t testing.TB, serve func(*sdk.Server) http.Handler) *testUpstream {
	u := &testUpstream{cancelled: make(chan struct{}, 8), started: make(chan struct{}, 8)}
	s := sdk.NewServer(&sdk.Implementation{Name: "up", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "echo", Description: "echoes", InputSchema: objectSchema},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo:" + string(req.Params.Arguments)}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", InputSchema: objectSchema},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "failed"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "slow", InputSchema: objectSchema},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 3, Message: "step 1"})
			}
			u.started <- struct{}{}
			<-ctx.Done()
			u.cancelled <- struct{}{}
			return nil, ctx.Err()
		})
	s.AddPrompt(&sdk.Prompt{Name: "greet", Arguments: []*sdk.PromptArgument{{Name: "who"}}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user",
				Content: &sdk.TextContent{Text: "hello " + req.Params.Arguments["who"]}}}}, nil
		})
	readFile := func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "contents of " + req.Params.URI}}}, nil
	}
	s.AddResource(&sdk.Resource{URI: "file:///pub/a.txt", Name: "a"}, readFile)
	s.AddResource(&sdk.Resource{URI: "file:///priv/b.txt", Name: "b"}, readFile)
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: "file:///pub/{name}", Name: "pub"}, readFile)
	s.AddPrompt(&sdk.Prompt{Name: "secret"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{}}, nil
	})
	u.srv = httptest.NewServer(serve(s))
	t.Cleanup(u.srv.Close)
	u.url = u.srv.URL
	return u
}

// bothProtocols serves s with sessions to clients of the older protocol
// versions and without to those of the sessionless one, as the gateway
// does.
func bothProtocols(s *sdk.Server) http.Handler {
	get := func(*http.Request) *sdk.Server { return s }
	stateful := sdk.NewStreamableHTTPHandler(get, nil)
	stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= statelessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
}

func openStore(t testing.TB) *raftstore.Store {
	t.Helper()
	s, err := raftstore.Open(raftstore.Config{
		Dir: t.TempDir(), NodeID: "n1", BindAddr: "127.0.0.1:0", Bootstrap: true, LogLevel: "error",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("store not ready: %v", err)
	}
	return s
}

func newEnv(t testing.TB, limiter Limiter) *env {
	e := &env{t: t, store: openStore(t), upstream: newTestUpstream(t)}
	e.start(Config{Limiter: limiter})
	return e
}

// start runs a gateway with cfg (and the env's state, recorder and short
// timings) on a test server.
func (e *env) start(cfg Config) {
	cfg.State, cfg.NodeID, cfg.Version = e.store, "n1", "test"
	if cfg.Cooldown == 0 {
		cfg.Cooldown = 50 * time.Millisecond
	}
	cfg.SyncInterval = 10 * time.Millisecond
	cfg.Record = func(rec *pb.SpendRecord, _ []*pb.BudgetUse) {
		e.mu.Lock()
		e.records = append(e.records, rec)
		e.mu.Unlock()
	}
	e.gw = New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.gw.Run(ctx); close(done) }()
	srv := httptest.NewServer(e.gw)
	e.t.Cleanup(func() { srv.Close(); cancel(); <-done })
	e.url = srv.URL
}

func (e *env) apply(cmd *pb.Command) {
	e.t.Helper()
	if _, err := e.store.Apply(context.Background(), cmd); err != nil {
		e.t.Fatalf("apply %T: %v", cmd.GetOp(), err)
	}
}

// addServer configures an upstream and waits until the gateway is
// connected to it.
func (e *env) addServer(name, url string) { e.addPricedServer(name, url, 0) }

// addPricedServer is addServer with a price per tool call.
func (e *env) addPricedServer(name, url string, price int64) {
	e.t.Helper()
	e.apply(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{
		Server: &pb.McpServer{Name: name, Transport: "http", Url: url, PricePerCallNanos: price}}}})
	e.waitState(name, stateConnected)
}

func (e *env) waitState(name, want string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := e.gw.Status(name)
		if st != nil && st.GetState() == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("server %s: state %v, want %s", name, st, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// addKey creates a key with the given MCP tools and limits, and returns
// its secret.
func (e *env) addKey(id string, tools []string, limits *pb.RateLimits) string {
	e.t.Helper()
	secret := "sk-test-" + id
	h := raftstore.HashSecret(secret)
	e.apply(&pb.Command{Op: &pb.Command_CreateKey{CreateKey: &pb.CreateKeyCommand{Key: &pb.StoredKey{
		Key: &pb.Key{Id: id, Name: id, Limits: limits}, SecretHash: h[:]}}}})
	if len(tools) > 0 {
		e.apply(&pb.Command{Op: &pb.Command_SetMcpTools{SetMcpTools: &pb.SetMcpToolsCommand{KeyId: id, Tools: tools}}})
	}
	return secret
}

// connect opens a Go SDK client session to path with the key, at a
// protocol version ("" for the SDK's latest).
func (e *env) connect(path, secret, version string, opts *sdk.ClientOptions) *sdk.ClientSession {
	e.t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, opts)
	hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, h: http.Header{"Authorization": {"Bearer " + secret}}, origin: originOf(e.url)}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: e.url + path, HTTPClient: hc, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		e.t.Fatalf("connect %s: %v", path, err)
	}
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// waitRecords waits until n records were written and returns them.
func (e *env) waitRecords(n int) []*pb.SpendRecord {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.mu.Lock()
		got := append([]*pb.SpendRecord(nil), e.records...)
		e.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d records, want %d", len(got), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func newLimiter() *ratelimit.Limiter { return ratelimit.New(ratelimit.Config{NodeID: "n1"}) }

func isRPCError(err error, code int64) bool {
	var w *jsonrpc.Error
	return errors.As(err, &w) && w.Code == code
}

// cancelUpstream waits until the slow tool started, cancels the client's
// call, and checks that the call failed as cancelled, that the upstream
// saw the cancellation and that record i says cancelled (499).
func (e *env) cancelUpstream(t *testing.T, cancel context.CancelFunc, errc <-chan error, i int) {
	t.Helper()
	<-e.upstream.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	select {
	case <-e.upstream.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream call was not cancelled")
	}
	if r := e.waitRecords(i + 1)[i]; r.GetOutcome() != outcomeCancelled || r.GetStatus() != 499 {
		t.Fatalf("record %v", r)
	}
}
