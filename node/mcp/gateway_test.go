package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/node/budget"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Both the sessionless protocol (2026-07-28) and the session-based one
// (2025-11-25) go through the same governance.
var versions = []string{"2026-07-28", "2025-11-25"}

func TestListsOnlyAllowedToolsNamespaced(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"up__echo", "*__sl*"}, nil)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			got := toolNames(t, e.connect("/mcp", secret, v, nil))
			if want := []string{"up__echo", "up__slow"}; !slices.Equal(got, want) {
				t.Fatalf("tools %v, want %v", got, want)
			}
			got = toolNames(t, e.connect("/mcp/up", secret, v, nil))
			if want := []string{"echo", "slow"}; !slices.Equal(got, want) {
				t.Fatalf("tools on /mcp/up %v, want %v", got, want)
			}
		})
	}
}

func TestKeyWithoutAllowListReachesNoTool(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", nil, nil)
	cs := e.connect("/mcp", secret, "", nil)
	if got := toolNames(t, cs); len(got) != 0 {
		t.Fatalf("tools %v, want none", got)
	}
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"})
	if !isRPCError(err, -32602) {
		t.Fatalf("call without allow-list: %v, want invalid params", err)
	}
	if r := e.waitRecords(1)[0]; r.GetOutcome() != outcomeRefused || r.GetStatus() != 403 || r.GetMcpTool() != "echo" {
		t.Fatalf("record %v", r)
	}
}

func TestCallsForwardedAndRecorded(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"up__*"}, nil)
	for i, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := e.connect("/mcp", secret, v, nil)
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}})
			if err != nil {
				t.Fatal(err)
			}
			if txt := res.Content[0].(*sdk.TextContent).Text; txt != `echo:{"x":1}` {
				t.Fatalf("result %q", txt)
			}
			res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__fail"})
			if err != nil || !res.IsError {
				t.Fatalf("fail: %v %v", res, err)
			}
			recs := e.waitRecords(2 * (i + 1))[2*i:]
			ok, failed := recs[0], recs[1]
			if ok.GetOutcome() != outcomeOK || ok.GetKeyId() != "k1" || ok.GetMcpServer() != "up" || ok.GetMcpTool() != "echo" ||
				ok.GetModel() != "mcp:up__echo" || ok.GetEndpoint() != "mcp" || ok.GetRequestBytes() != int64(len(`{"x":1}`)) ||
				ok.GetResponseBytes() == 0 || ok.GetStatus() != 200 {
				t.Fatalf("ok record %v", ok)
			}
			if failed.GetOutcome() != outcomeToolError {
				t.Fatalf("fail record %v", failed)
			}
		})
	}
}

func TestProgressRelayedAndCancellationForwarded(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"up__slow"}, nil)
	for i, v := range versions {
		t.Run(v, func(t *testing.T) {
			progress := make(chan *sdk.ProgressNotificationParams, 4)
			cs := e.connect("/mcp", secret, v, &sdk.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) { progress <- r.Params }})
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				p := &sdk.CallToolParams{Name: "up__slow"}
				p.SetProgressToken("client-token")
				_, err := cs.CallTool(ctx, p)
				errc <- err
			}()
			select {
			case p := <-progress:
				if p.ProgressToken != "client-token" || p.Progress != 1 || p.Total != 3 || p.Message != "step 1" {
					t.Fatalf("progress %+v", p)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no progress notification")
			}
			e.cancelUpstream(t, cancel, errc, i)
		})
	}
}

func TestRateLimitAppliesToToolCalls(t *testing.T) {
	e := newEnv(t, newLimiter())
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"*"}, &pb.RateLimits{Rpm: 2})
	cs := e.connect("/mcp", secret, "", nil)
	for range 2 {
		if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"})
	if !isRPCError(err, codeGateway) || !strings.Contains(err.Error(), "Rate limit") {
		t.Fatalf("third call: %v, want rate limited", err)
	}
	if r := e.waitRecords(3)[2]; r.GetOutcome() != outcomeRateLimited || r.GetStatus() != 429 {
		t.Fatalf("record %v", r)
	}
}

func TestFailingUpstreamMarkedUnavailableNotFailingTheList(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/mcp"
	_ = ln.Close()
	e.apply(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{
		Server: &pb.McpServer{Name: "dead", Url: dead}}}})
	e.waitState("dead", stateCooling)
	secret := e.addKey("k1", []string{"*"}, nil)
	cs := e.connect("/mcp", secret, "", nil)
	if got := toolNames(t, cs); !slices.Equal(got, []string{"up__echo", "up__fail", "up__slow"}) {
		t.Fatalf("tools %v", got)
	}
	// The upstream goes away: its tools stay listed, marked unavailable,
	// and calls fail fast.
	e.upstream.srv.CloseClientConnections()
	e.upstream.srv.Close()
	_, _ = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"})
	e.waitState("up", stateCooling)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 3 || !strings.HasPrefix(res.Tools[0].Description, "[unavailable") ||
		res.Tools[0].Meta["tollgate/unavailable"] != true {
		t.Fatalf("list with the upstream down: %v %v", res, err)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"}); !isRPCError(err, codeGateway) {
		t.Fatalf("call to a cooling server: %v", err)
	}
	if st := e.gw.Status("up"); st.GetLastError() == "" || st.GetRetryAt() == nil {
		t.Fatalf("status %v", st)
	}
}

func TestUnauthenticatedGetsProtectedResourceMetadata(t *testing.T) {
	e := newEnv(t, nil)
	resp, err := http.Post(e.url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	wa := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(wa, `resource_metadata="`+e.url+"/.well-known/oauth-protected-resource/mcp") {
		t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, wa)
	}
	resp, err = http.Get(e.url + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var meta struct {
		Resource string   `json:"resource"`
		Methods  []string `json:"bearer_methods_supported"`
	}
	if err := json.Unmarshal(b, &meta); err != nil || meta.Resource != e.url+"/mcp" || !slices.Equal(meta.Methods, []string{"header"}) {
		t.Fatalf("metadata %s: %v", b, err)
	}
	revoked := e.addKey("k2", []string{"*"}, nil)
	e.apply(&pb.Command{UnixNanos: time.Now().UnixNano(), Op: &pb.Command_RevokeKey{RevokeKey: &pb.RevokeKeyCommand{Id: "k2"}}})
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+revoked)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked key: %d", resp.StatusCode)
	}
}

// A session another node created (or one this node dropped) is unknown
// here: the client gets 404 and, per the specification, starts a new
// session.
func TestUnknownSessionIs404(t *testing.T) {
	e := newEnv(t, nil)
	secret := e.addKey("k1", []string{"*"}, nil)
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", "session-of-a-node-that-died")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session: %d, want 404", resp.StatusCode)
	}
}

func TestPricedCallsChargedToTheKeysBudget(t *testing.T) {
	e := &env{t: t, store: openStore(t), upstream: newTestUpstream(t)}
	budgets := budget.New(budget.Config{NodeID: "n1", State: e.store, ProposeResult: e.store.Apply, GrantWait: time.Second})
	e.start(Config{Budgets: budgets})
	e.apply(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{
		Server: &pb.McpServer{Name: "up", Url: e.upstream.url, PricePerCallNanos: 6_000_000}}}})
	e.waitState("up", stateConnected)
	secret := e.addKey("k1", []string{"*"}, nil)
	e.apply(&pb.Command{Op: &pb.Command_UpdateKey{UpdateKey: &pb.UpdateKeyCommand{Update: &pb.UpdateKeyRequest{Id: "k1",
		Budget: &pb.Budget{LimitNanos: 10_000_000, Period: "total"}}}}})
	cs := e.connect("/mcp", secret, "", nil)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"}); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"})
	if !isRPCError(err, codeGateway) || !strings.Contains(err.Error(), "Budget") {
		t.Fatalf("a call past the budget: %v", err)
	}
	recs := e.waitRecords(2)
	if recs[0].GetCostNanos() != 6_000_000 || recs[1].GetOutcome() != outcomeBudget || recs[1].GetCostNanos() != 0 {
		t.Fatalf("records %v", recs)
	}
}

func TestPromptsForwardedByAllowList(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"up__greet"}, nil)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := e.connect("/mcp", secret, v, nil)
			res, err := cs.ListPrompts(context.Background(), nil)
			if err != nil || len(res.Prompts) != 1 || res.Prompts[0].Name != "up__greet" {
				t.Fatalf("prompts %v %v", res, err)
			}
			got, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: "up__greet", Arguments: map[string]string{"who": "you"}})
			if err != nil || got.Messages[0].Content.(*sdk.TextContent).Text != "hello you" {
				t.Fatalf("get prompt %v %v", got, err)
			}
			if _, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: "up__secret"}); !isRPCError(err, -32602) {
				t.Fatalf("a prompt outside the allow-list: %v", err)
			}
		})
	}
}

func TestLegacySSEUpstream(t *testing.T) {
	e := newEnv(t, nil)
	s := sdk.NewServer(&sdk.Implementation{Name: "old", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "ping", InputSchema: objectSchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil
	})
	srv := httptest.NewServer(sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() }) // the gateway's stream is still open
	e.apply(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{
		Server: &pb.McpServer{Name: "old", Transport: "sse", Url: srv.URL}}}})
	e.waitState("old", stateConnected)
	cs := e.connect("/mcp", e.addKey("k1", []string{"old__*"}, nil), "", nil)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "old__ping"})
	if err != nil || res.Content[0].(*sdk.TextContent).Text != "pong" {
		t.Fatalf("call through an SSE upstream: %v %v", res, err)
	}
}
