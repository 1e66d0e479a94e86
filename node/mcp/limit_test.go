package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// endlessOffer is what an endless upstream answer offers at most (every
// load loop is bounded); the gateway's bound in these tests is 1 MiB.
const endlessOffer = 64 << 20

// How an endless answer comes: JSON of unknown length, JSON with a
// Content-Length claiming it all, or one event of an event stream.
const (
	endlessJSON    = "json"
	endlessClaimed = "json with a content-length"
	endlessEvent   = "event stream"
)

// answerEndlessly answers a tools/call of the tool "huge" with an answer
// of endlessOffer bytes, written as it goes the way how says, and passes
// everything else to next.
func answerEndlessly(how string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := toolCallID(r, "huge")
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		head := []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"`)
		switch how {
		case endlessClaimed:
			w.Header().Set("Content-Length", strconv.Itoa(endlessOffer))
		case endlessEvent:
			w.Header().Set("Content-Type", "text/event-stream")
			head = append([]byte("event: message\ndata: "), head...)
		}
		if _, err := w.Write(head); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("a"), 32<<10)
		for sent := len(head); sent+len(chunk) <= endlessOffer; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the gateway stopped reading
			}
		}
	})
}

// toolCallID returns the id of r's call of the tool name, if it is one
// (r's body stays readable).
func toolCallID(r *http.Request, name string) (json.RawMessage, bool) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		ID     json.RawMessage       `json:"id"`
		Method string                `json:"method"`
		Params struct{ Name string } `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || msg.Params.Name != name {
		return nil, false
	}
	return msg.ID, true
}

// An upstream answer larger than the bound (here an endless one, with
// and without a Content-Length) fails that call with a JSON-RPC error
// saying so, uncharged, while the gateway reads and allocates about the
// bound, not what the upstream sends; the session goes on for the next
// call. Before, the SDK read the answer whole into memory.
func TestUpstreamAnswerPastTheBoundFailsTheCallAndStaysBounded(t *testing.T) {
	for _, how := range []string{endlessJSON, endlessClaimed, endlessEvent} {
		t.Run(how, func(t *testing.T) {
			e := &env{t: t, store: openStore(t)}
			e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler { return answerEndlessly(how, bothProtocols(s)) })
			e.start(Config{MaxUpstreamMessageBytes: 1 << 20})
			e.addPricedServer("up", e.upstream.url, forgetfulPrice)
			cs := e.connect("/mcp", e.addKey("k1", []string{"up__*"}, nil), "", nil)
			sess, _ := e.gw.upstream("up").session()

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__huge"})
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d KiB during the call", alloc>>10)
			if alloc > 16<<20 {
				t.Errorf("the gateway allocated %d MiB for an answer past its 1 MiB bound", alloc>>20)
			}
			if !isRPCError(err, codeAnswerTooLarge) {
				t.Fatalf("a call answered endlessly: %v, want answer too large (%d)", err, codeAnswerTooLarge)
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}})
			if err != nil || res.IsError {
				t.Fatalf("the next call: %v %v", res, err)
			}
			if now, _ := e.gw.upstream("up").session(); now != sess {
				t.Errorf("an answer past the bound ended the session (state %v)", e.gw.Status("up"))
			}
			if r := e.waitRecords(2)[0]; r.GetOutcome() != outcomeUpstream || r.GetCostNanos() != 0 {
				t.Errorf("the dropped answer's record: %s cost %d, want upstream_error cost 0", r.GetOutcome(), r.GetCostNanos())
			}
		})
	}
}

// The events of a call's stream under the bound pass whole and
// unchanged, however the stream is cut on the wire.
func TestEventsUnderTheBoundPassUnchanged(t *testing.T) {
	in := "event: message\ndata: {\"a\":1}\n\n: comment\r\n\r\nid: 3\ndata: x\ndata: y\n\ndata: last, unterminated"
	b := &boundedEvents{rc: io.NopCloser(iotest.OneByteReader(strings.NewReader(in))), max: 32}
	out, err := io.ReadAll(b)
	if err != nil || string(out) != in {
		t.Fatalf("read %q, %v; want %q", out, err, in)
	}
}
