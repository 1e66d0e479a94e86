package mcp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// answerOneEventOf answers a tools/call of the tool "huge" with an event
// stream holding one event (its answer) of exactly size bytes, written at
// once, and passes everything else to next.
func answerOneEventOf(size int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := toolCallID(r, "huge")
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(eventOfSize(size, string(id)))
	})
}

// eventOfSize is an event answering the call id with a text, exactly
// size bytes long with its blank line.
func eventOfSize(size int, id string) []byte {
	head := "event: message\ndata: " + `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"`
	tail := `"}]}}` + "\n\n"
	return []byte(head + strings.Repeat("a", size-len(head)-len(tail)) + tail)
}

// An event just past the bound that arrives whole in one read (a few
// bytes, or up to one read's worth, past it) is dropped like a longer
// one: the call fails with -32011 and the session goes on. Before, it
// was passed to the SDK, whose own bound (the same) ended the session
// and cooled the server for every key.
func TestEventJustPastTheBoundFailsTheCallAndKeepsTheSession(t *testing.T) {
	const bound = 1 << 20
	e := &env{t: t, store: openStore(t)}
	e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler { return answerOneEventOf(bound+1, bothProtocols(s)) })
	e.start(Config{MaxUpstreamMessageBytes: bound})
	e.addPricedServer("up", e.upstream.url, forgetfulPrice)
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__*"}, nil), "", nil)
	sess, _ := e.gw.upstream("up").session()
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__huge"}); !isRPCError(err, codeAnswerTooLarge) {
		t.Fatalf("a call answered with an event one byte past the bound: %v, want %d", err, codeAnswerTooLarge)
	}
	if now, _ := e.gw.upstream("up").session(); now != sess {
		t.Fatalf("an event one byte past the bound ended the session (state %v)", e.gw.Status("up"))
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}})
	if err != nil || res.IsError {
		t.Fatalf("the next call: %v %v", res, err)
	}
}

// The events before one past the bound pass unchanged; the one past it
// is replaced by the call's answer, whatever size the reads come in.
func TestEventsBeforeOnePastTheBoundPassThenTheCallsAnswer(t *testing.T) {
	small := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"
	for _, size := range []int{1025, 1100, 5000} {
		in := small + string(eventOfSize(size, "7")) + small
		b := &boundedEvents{rc: io.NopCloser(strings.NewReader(in)), max: 1024, id: mustID(t, float64(7)),
			tooLarge: &jsonrpc.Error{Code: codeAnswerTooLarge, Message: "too large"}}
		out, err := io.ReadAll(b)
		if err != nil {
			t.Fatalf("event of %d: %v", size, err)
		}
		want := small + "event: message\ndata: " + `{"jsonrpc":"2.0","id":7,"error":{"code":-32011,"message":"too large"}}` + "\n\n"
		if string(out) != want {
			t.Errorf("event of %d bytes under a bound of 1024: read %.200q, want %q", size, out, want)
		}
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// An event of exactly the bound is no event past it: it passes unchanged.
func TestEventOfExactlyTheBoundPassesUnchanged(t *testing.T) {
	in := string(eventOfSize(1024, "7"))
	b := &boundedEvents{rc: io.NopCloser(strings.NewReader(in)), max: 1024}
	if out, err := io.ReadAll(b); err != nil || string(out) != in {
		t.Fatalf("an event of exactly the bound: read %d bytes, %v; want it unchanged", len(out), err)
	}
}
