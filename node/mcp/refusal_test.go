package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// refuseLarge answers 413 in plain text, as a reverse proxy with a body
// limit in front of an MCP server does (nginx's client_max_body_size),
// to a request body over limit bytes, and passes the others to next.
func refuseLarge(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			http.Error(w, "413 Request Entity Too Large", http.StatusRequestEntityTooLarge)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// newRefusingEnv is a gateway connected to the test upstream ("up")
// behind a proxy that answers 413 to a body over 4 KiB.
func newRefusingEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, store: openStore(t)}
	e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler { return refuseLarge(4096, bothProtocols(s)) })
	e.start(Config{})
	e.addServer("up", e.upstream.url)
	return e
}

// TestUpstreamRefusingOneRequestDoesNotCoolTheServer pins that an
// upstream's HTTP 4xx to one call (here a proxy's 413 to a large
// argument) is that call's error, not the server's: the server is not put
// in cooldown for every other key, and their calls go on.
func TestUpstreamRefusingOneRequestDoesNotCoolTheServer(t *testing.T) {
	e := newRefusingEnv(t)
	big := e.addKey("big", []string{"up__*"}, nil)
	other := e.addKey("other", []string{"up__*"}, nil)

	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := e.connect("/mcp", big, v, nil)
			_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo",
				Arguments: map[string]any{"x": strings.Repeat("a", 8192)}})
			if err == nil {
				t.Fatal("a call the upstream refused with 413 succeeded")
			}
			if !strings.Contains(err.Error(), "413") && !strings.Contains(err.Error(), "Too Large") {
				t.Errorf("the error does not say what the server answered: %v", err)
			}
			if st := e.gw.Status("up"); st.GetState() == stateCooling || st.GetRetryAt() != nil {
				t.Fatalf("one refused call put the server in cooldown: %v", st)
			}
			e.waitState("up", stateConnected)
			oc := e.connect("/mcp", other, v, nil)
			res, err := oc.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}})
			if err != nil || res.IsError {
				t.Fatalf("another key's call after the refusal: %v %v", res, err)
			}
		})
	}
}

// TestLegacySSEUpstreamRefusingOneRequestDoesNotCoolTheServer is the same
// for a legacy SSE upstream, whose SDK transport ends the session on any
// refused POST: the gateway opens a new one at once instead of cooling.
func TestLegacySSEUpstreamRefusingOneRequestDoesNotCoolTheServer(t *testing.T) {
	e := newEnv(t, nil)
	s := sdk.NewServer(&sdk.Implementation{Name: "old", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: objectSchema}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo:" + string(req.Params.Arguments)}}}, nil
	})
	srv := httptest.NewServer(refuseLarge(4096, sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return s }, nil)))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	e.apply(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{
		Server: &pb.McpServer{Name: "old", Transport: "sse", Url: srv.URL}}}})
	e.waitState("old", stateConnected)

	cs := e.connect("/mcp", e.addKey("big", []string{"old__*"}, nil), "", nil)
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "old__echo",
		Arguments: map[string]any{"x": strings.Repeat("a", 8192)}})
	if err == nil || !strings.Contains(err.Error(), "HTTP 413") {
		t.Fatalf("a call the upstream refused with 413: %v", err)
	}
	if st := e.gw.Status("old"); st.GetState() == stateCooling || st.GetRetryAt() != nil {
		t.Fatalf("one refused call put the server in cooldown: %v", st)
	}
	e.waitState("old", stateConnected)
	oc := e.connect("/mcp", e.addKey("other", []string{"old__*"}, nil), "", nil)
	if res, err := oc.CallTool(context.Background(), &sdk.CallToolParams{Name: "old__echo"}); err != nil || res.IsError {
		t.Fatalf("another key's call after the refusal: %v %v", res, err)
	}
	if recs := e.waitRecords(2); recs[0].GetCostNanos() != 0 || recs[0].GetOutcome() != outcomeUpstream {
		t.Errorf("the refused call's record: %v", recs[0])
	}
}

func TestOnlyRequestFaultsCountAsRefusals(t *testing.T) {
	for code, want := range map[int]bool{400: true, 403: true, 413: true, 422: true, 431: true,
		401: false, 407: false, 404: false, 408: false, 429: false, 500: false, 502: false, 503: false, 200: false} {
		if got := refusedByRequest(code); got != want {
			t.Errorf("refusedByRequest(%d) = %v, want %v", code, got, want)
		}
	}
}

// A legacy SSE upstream's session carries every key's calls: a refusal of
// one key's request must not end it (nor open a new one), or a key sending
// oversized requests in a loop fails the others' calls in flight and
// keeps the server away from them.
func TestLegacySSERefusalKeepsOtherKeysCallsInFlight(t *testing.T) {
	e := newEnv(t, nil)
	started, release := make(chan struct{}), make(chan struct{})
	s := sdk.NewServer(&sdk.Implementation{Name: "old", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: objectSchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo"}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "slow", InputSchema: objectSchema}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil
	})
	srv := httptest.NewServer(refuseLarge(4096, sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return s }, nil)))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	e.apply(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{
		Server: &pb.McpServer{Name: "old", Transport: "sse", Url: srv.URL, TimeoutMs: 10_000}}}})
	e.waitState("old", stateConnected)
	oc := e.connect("/mcp", e.addKey("other", []string{"old__*"}, nil), "", nil)
	type answer struct {
		res *sdk.CallToolResult
		err error
	}
	slow := make(chan answer, 1)
	go func() {
		res, err := oc.CallTool(context.Background(), &sdk.CallToolParams{Name: "old__slow"})
		slow <- answer{res, err}
	}()
	<-started

	cs := e.connect("/mcp", e.addKey("big", []string{"old__*"}, nil), "", nil)
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "old__echo",
		Arguments: map[string]any{"x": strings.Repeat("a", 8192)}})
	if !isRPCError(err, codeUpstreamRefused) {
		t.Fatalf("a call the upstream refused with 413: %v", err)
	}
	if st := e.gw.Status("old"); st.GetState() != stateConnected {
		t.Errorf("after one refused call the server is %v, want still connected", st)
	}
	close(release)
	if a := <-slow; a.err != nil || a.res.IsError {
		t.Fatalf("another key's call in flight during the refusal: %v %v", a.res, a.err)
	}
}

// A refused request is answered as that request's error however much the
// gateway's copy of it grew: a prompt argument of invalid UTF-8 (one byte
// each from the client, three as U+FFFD upstream) makes an upstream
// request three times the client's, past any bound on re-reading it, and
// a refusal the gateway could not match to its request ended the session
// and cooled the server for every key.
func TestRefusalOfARequestGrownUpstreamIsStillThatRequestsError(t *testing.T) {
	e := newRefusingEnv(t)
	secret := e.addKey("k1", []string{"up__*"}, nil)
	who := strings.Repeat("\xff", 3<<20) // 3 MiB from the client, 9 MiB upstream
	_, body := postSessionless(t, e, secret,
		`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"up__greet","arguments":{"who":"`+who+`"},`+sessionlessMeta+`}}`,
		map[string]string{"Mcp-Method": "prompts/get", "Mcp-Name": "up__greet"})
	if !strings.Contains(body, `"code":-32010`) {
		t.Errorf("the refused prompt's answer: %.300s, want its own refusal (-32010)", body)
	}
	if st := e.gw.Status("up"); st.GetState() != stateConnected {
		t.Fatalf("one refused request took the server down: %v", st)
	}
}

// The ping that follows a refusal is for an upstream's session: a
// sessionless upstream (2026-07-28) has none to forget, and its protocol
// has no ping (the SDK's server refuses it), which must not cool the
// server for every key.
func TestRefusalByASessionlessUpstreamDoesNotCoolIt(t *testing.T) {
	up := newTestUpstreamServing(t, func(s *sdk.Server) http.Handler { return refuseLarge(4096, sessionlessOnly(s)) })
	e := &env{t: t, store: openStore(t), upstream: up}
	e.start(Config{})
	e.addServer("up", up.url)
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__*"}, nil), "", nil)
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo",
		Arguments: map[string]any{"x": strings.Repeat("a", 8192)}})
	if !isRPCError(err, codeUpstreamRefused) {
		t.Fatalf("a call the upstream refused with 413: %v", err)
	}
	u := e.gw.upstream("up")
	sess, _ := u.session()
	if sess == nil {
		t.Fatalf("the refusal ended the session: %v", e.gw.Status("up"))
	}
	if ns := u.recover(context.Background(), sess, false); ns != nil {
		t.Errorf("a sessionless upstream's refusal opened a new session")
	}
	if st := e.gw.Status("up"); st.GetState() != stateConnected {
		t.Fatalf("after a refusal and its probe the server is %v, want connected", st)
	}
}
