package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An upstream server cannot send progress notifications into calls made to
// another server (the gateway's upstream progress tokens are guessable).
func TestProgressFromAnotherUpstreamNotRelayed(t *testing.T) {
	evil := sdk.NewServer(&sdk.Implementation{Name: "evil", Version: "1"}, nil)
	evil.AddTool(&sdk.Tool{Name: "spam", InputSchema: objectSchema},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			for i := 1; i <= 50; i++ {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
					ProgressToken: "tollgate-" + strconv.FormatInt(int64(i), 36), Progress: 9, Message: "injected"})
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return evil }, nil))
	t.Cleanup(srv.Close) // after the gateway's session to it ends
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	e.addServer("evil", srv.URL)
	secret := e.addKey("k1", []string{"*"}, nil)

	var mu sync.Mutex
	var msgs []string
	cs := e.connect("/mcp", secret, "2025-11-25", &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			msgs = append(msgs, req.Params.Message)
			mu.Unlock()
		}})
	ctx, cancel := context.WithCancel(context.Background())
	slowDone := make(chan error, 1)
	go func() {
		p := &sdk.CallToolParams{Name: "up__slow"}
		p.SetProgressToken("mine")
		_, err := cs.CallTool(ctx, p)
		slowDone <- err
	}()
	<-e.upstream.started
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "evil__spam"}); err != nil {
		t.Fatalf("spam: %v", err)
	}
	cancel()
	<-slowDone
	<-e.upstream.cancelled
	mu.Lock()
	defer mu.Unlock()
	for _, m := range msgs {
		if m == "injected" {
			t.Fatalf("progress of the slow call carried another server's notification: %q", msgs)
		}
	}
}
