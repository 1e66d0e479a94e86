package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What the gateway reads of one upstream message is bounded
// (Config.MaxUpstreamMessageBytes): the SDK's client reads a JSON answer
// whole (io.ReadAll) and an error answer's body whole, so a broken or
// lying server could make the node buffer without end. limitTransport
// bounds them below the SDK; an event of a stream the SDK bounds itself
// (StreamableClientTransport.MaxEventSize, set to the same bound).

// defaultMaxUpstreamMessage is the default bound on one upstream message.
const defaultMaxUpstreamMessage = 16 << 20

// codeAnswerTooLarge is the JSON-RPC error code of a call whose upstream
// answer was larger than the bound.
const codeAnswerTooLarge = -32011

// errMessageTooLarge ends the read of a body past the bound that is no
// call's answer.
var errMessageTooLarge = errors.New("MCP upstream message too large")

// limitTransport bounds the response bodies of an upstream (max bytes).
// A call's JSON answer past the bound becomes that call's JSON-RPC error
// (codeAnswerTooLarge), so the session goes on for the other calls.
type limitTransport struct {
	base   http.RoundTripper
	server string
	max    int64
}

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		// An error's body: read whole by the SDK to find a JSON-RPC error.
		resp.Body = capped(resp.Body, maxRefusalBody)
		return resp, nil
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return resp, nil // an event stream: bounded per event by the SDK
	}
	id, isCall := jsonrpc.ID{}, false
	if r.Method == http.MethodPost && r.GetBody != nil {
		id, isCall = requestID(r)
	}
	if !isCall {
		resp.Body = capped(resp.Body, t.max)
		return resp, nil
	}
	tooLarge := &jsonrpc.Error{Code: codeAnswerTooLarge,
		Message: fmt.Sprintf("MCP server %s answered with more than %d bytes; the gateway dropped the answer.", t.server, t.max)}
	if resp.ContentLength > t.max {
		_ = resp.Body.Close()
		return answerWith(resp, id, tooLarge)
	}
	if resp.ContentLength < 0 { // net/http stops a body at its Content-Length
		resp.Body = &boundedAnswer{rc: resp.Body, max: t.max, id: id, tooLarge: tooLarge}
	}
	return resp, nil
}

// capped returns rc reading at most max bytes, then errMessageTooLarge.
func capped(rc io.ReadCloser, max int64) io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, max), &tooLargeReader{rc: rc}), rc}
}

// tooLargeReader ends a capped body: EOF if nothing follows the bound,
// else errMessageTooLarge.
type tooLargeReader struct{ rc io.Reader }

func (t *tooLargeReader) Read([]byte) (int, error) {
	var b [1]byte
	if n, _ := io.ReadFull(t.rc, b[:]); n == 0 {
		return 0, io.EOF
	}
	return 0, errMessageTooLarge
}

// boundedAnswer is a call's JSON answer of unknown length: on the first
// Read it reads at most max bytes, and past them answers the call with
// tooLarge instead (the rest is not read; the connection is closed).
type boundedAnswer struct {
	rc       io.ReadCloser
	max      int64
	id       jsonrpc.ID
	tooLarge *jsonrpc.Error
	r        io.Reader
}

func (b *boundedAnswer) Read(p []byte) (int, error) {
	if b.r == nil {
		data, err := io.ReadAll(io.LimitReader(b.rc, b.max+1))
		switch {
		case err != nil:
			return 0, err
		case int64(len(data)) > b.max:
			_ = b.rc.Close()
			answer, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: b.id, Error: b.tooLarge})
			if err != nil {
				return 0, err
			}
			b.r = bytes.NewReader(answer)
		default:
			b.r = bytes.NewReader(data)
		}
	}
	return b.r.Read(p)
}

func (b *boundedAnswer) Close() error { return b.rc.Close() }
