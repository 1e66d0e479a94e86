package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What the gateway reads of one upstream message is bounded
// (Config.MaxUpstreamMessageBytes): the SDK's client reads a JSON answer
// whole (io.ReadAll) and an error answer's body whole, so a broken or
// lying server could make the node buffer without end. limitTransport
// bounds them below the SDK, and the events of a stream answering a call
// (boundedEvents); the SDK bounds those of the standalone stream itself
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
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	id, isCall := jsonrpc.ID{}, false
	if r.Method == http.MethodPost && r.GetBody != nil {
		id, isCall = requestID(r)
	}
	tooLarge := &jsonrpc.Error{Code: codeAnswerTooLarge,
		Message: fmt.Sprintf("MCP server %s answered with more than %d bytes; the gateway dropped the answer.", t.server, t.max)}
	switch {
	case mt == "text/event-stream" && isCall:
		resp.Body = &boundedEvents{rc: resp.Body, max: int(t.max), id: id, tooLarge: tooLarge}
		return resp, nil
	case mt == "text/event-stream":
		return resp, nil // the standalone stream: the SDK bounds its events
	case mt != "application/json" || !isCall:
		resp.Body = capped(resp.Body, t.max)
		return resp, nil
	}
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

// boundedEvents is the event stream answering a call: it passes on whole
// events only (as the SDK's reader needs them whole anyway), and when one
// grows past max it drops it and ends the stream with an event answering
// the call with tooLarge, as the stream's last. The SDK would end the
// whole session on such an event, and the gateway cool the server for
// every key.
type boundedEvents struct {
	rc       io.ReadCloser
	max      int
	id       jsonrpc.ID
	tooLarge *jsonrpc.Error
	buf      []byte // read and not yet passed on
	ready    int    // buf[:ready] are whole events
	line     int    // where the line being scanned starts in buf
	scanned  int    // buf[:scanned] is scanned for event ends
	err      error  // the end of the stream, once read
	over     bool   // the event after buf[:ready] is past the bound
}

func (b *boundedEvents) Read(p []byte) (int, error) {
	for b.ready == 0 {
		if b.over {
			b.drop()
			break
		}
		if b.err != nil {
			return 0, b.err
		}
		b.fill()
	}
	n := copy(p, b.buf[:b.ready])
	b.buf, b.ready, b.line, b.scanned = b.buf[n:], b.ready-n, b.line-n, b.scanned-n
	return n, nil
}

// fill reads more of the stream and marks the whole events in it ready;
// at the stream's end all that was read is.
func (b *boundedEvents) fill() {
	if cap(b.buf)-len(b.buf) < 4<<10 {
		b.buf = slices.Grow(b.buf, 32<<10)
	}
	n, err := b.rc.Read(b.buf[len(b.buf):cap(b.buf)])
	b.buf = b.buf[:len(b.buf)+n]
	for i := b.scanned; i < len(b.buf) && !b.over; i++ {
		if b.buf[i] != '\n' {
			continue
		}
		if l := bytes.TrimRight(b.buf[b.line:i], "\r"); len(l) == 0 {
			// An empty line ends an event: one past the bound (it may
			// have come whole in this read) is not passed on.
			b.over = i+1-b.ready > b.max
			if !b.over {
				b.ready = i + 1
			}
		}
		b.line = i + 1
	}
	b.scanned = len(b.buf)
	b.over = b.over || len(b.buf)-b.ready > b.max
	if err != nil && !b.over {
		b.err, b.ready = err, len(b.buf)
	}
}

// drop replaces the event past the bound with the call's answer and ends
// the stream there.
func (b *boundedEvents) drop() {
	_ = b.rc.Close()
	answer, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: b.id, Error: b.tooLarge})
	if err != nil {
		b.buf, b.ready, b.err = nil, 0, err
		return
	}
	b.buf = append(append([]byte("event: message\ndata: "), answer...), "\n\n"...)
	b.ready, b.line, b.scanned, b.err, b.over = len(b.buf), len(b.buf), len(b.buf), io.EOF, false
}

func (b *boundedEvents) Close() error { return b.rc.Close() }
