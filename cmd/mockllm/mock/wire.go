package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

var (
	jsonType = []string{"application/json"}
	sseType  = []string{"text/event-stream"}
	noCache  = []string{"no-cache"}
	errReset = errors.New("mock: connection reset")
)

// writeBody writes a complete JSON response, or with midReset only its
// first half followed by a connection reset.
func (s *Server) writeBody(w http.ResponseWriter, status int, body []byte, midReset bool) error {
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	if midReset {
		_, _ = w.Write(body[:len(body)/2])
		_ = http.NewResponseController(w).Flush() // hijacking discards unflushed output
		s.reset(w)
		return errReset
	}
	_, err := w.Write(body)
	return err
}

// writeError writes an OpenAI-shaped error; code "" is encoded as null.
func (s *Server) writeError(w http.ResponseWriter, status int, msg, code string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusTooManyRequests:
		typ = "requests"
	case status >= 500:
		typ = "server_error"
	}
	buf := getBuf()
	defer putBuf(buf)
	b := append((*buf)[:0], `{"error":{"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"type":"`...)
	b = append(b, typ...)
	b = append(b, `","param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, code)
	}
	b = append(b, "}}"...)
	*buf = b
	s.errors.Add(1)
	s.finish(s.writeBody(w, status, b, false))
}

func writeFlush(w http.ResponseWriter, rc *http.ResponseController, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// reset closes the client connection abruptly (TCP RST), without a response.
func (s *Server) reset(w http.ResponseWriter) {
	s.resets.Add(1)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // e.g. HTTP/2: abort the stream instead
	}
	if u, ok := conn.(interface{ NetConn() net.Conn }); ok { // TLS
		conn = u.NetConn()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// sleep waits d on the (lazily created) timer *t; false if ctx ended first.
func sleep(ctx context.Context, t **time.Timer, d time.Duration) bool {
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-ctx.Done():
		return false
	case <-(*t).C:
		return true
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= 1<<20 {
		bufPool.Put(b)
	}
}

func readBody(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		} else if err != nil {
			return b, err
		}
	}
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	return append(appendEscaped(append(b, '"'), s), '"')
}

// appendEscaped appends s escaped for the inside of a JSON string.
func appendEscaped(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	return append(b, s[start:]...)
}

// textLen decodes message content or a prompt (a string, an array of strings,
// content parts or token ids) into its length in characters; a token id
// counts as 4 characters.
type textLen int

func (t *textLen) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case '"':
		if bytes.IndexByte(b, '\\') < 0 {
			*t = textLen(utf8.RuneCount(b[1 : len(b)-1]))
			return nil
		}
		var s string
		err := json.Unmarshal(b, &s)
		*t = textLen(utf8.RuneCountInString(s))
		return err
	case '[':
		var parts []textLen
		err := json.Unmarshal(b, &parts)
		*t = 0
		for _, n := range parts {
			*t += n
		}
		return err
	case '{':
		var part struct {
			Text textLen `json:"text"`
		}
		err := json.Unmarshal(b, &part)
		*t = part.Text
		return err
	case 'n': // null
		*t = 0
	default: // token id
		*t = 4
	}
	return nil
}

const contentFiller = "This is a deterministic completion from the mock LLM server, " +
	"used for tests, benchmarks and demos of the gateway. "

var (
	baseText atomic.Pointer[string]
	// streamTokens are the content deltas of stream chunks, in a cycle.
	streamTokens = []string{"Hello", " from", " mockllm.", " This", " is", " a", " streamed",
		" completion", " from", " the", " mock", " LLM", " server. "}
)

// content returns n bytes of deterministic ASCII text starting with
// "Hello from mockllm." and needing no JSON escaping. It does not allocate
// once a text of that size has been built.
func content(n int) string {
	if p := baseText.Load(); p != nil && len(*p) >= n {
		return (*p)[:n]
	}
	size := max(n, 4096)
	var sb strings.Builder
	sb.Grow(size + len(contentFiller))
	sb.WriteString("Hello from mockllm. ")
	for sb.Len() < size {
		sb.WriteString(contentFiller)
	}
	s := sb.String()
	for old := baseText.Load(); (old == nil || len(*old) < len(s)) && !baseText.CompareAndSwap(old, &s); old = baseText.Load() {
	}
	return s[:n]
}

// streamer writes the events of a streamed answer in any format. Content
// deltas (text pieces or tool-argument pieces) go through delta, which
// applies the interval directive between them and the reset-mid-stream fault
// after half of them; other events are sent as they come.
type streamer struct {
	s   *Server
	w   http.ResponseWriter
	rc  *http.ResponseController
	ctx context.Context
	t   *time.Timer
	gap time.Duration // the interval directive
	n   int           // content deltas begun so far
	cut int           // the delta before which a reset-mid-stream fault resets; -1 for none
}

// startStream writes the 200 response headers of a stream that will have
// deltas content deltas.
func (s *Server) startStream(w http.ResponseWriter, ctx context.Context, p *params, contentType []string, deltas int) *streamer {
	h := w.Header()
	h["Content-Type"] = contentType
	h["Cache-Control"] = noCache
	w.WriteHeader(http.StatusOK)
	st := &streamer{s: s, w: w, rc: http.NewResponseController(w), ctx: ctx, gap: p.interval, cut: -1}
	if p.fault == faultMidStream {
		st.cut = deltas / 2
	}
	return st
}

// delta prepares the next content delta: it resets the connection (and
// returns errReset) if the fault says so, else waits for the interval
// (except before the first delta).
func (st *streamer) delta() error {
	if st.n == st.cut {
		st.s.reset(st.w)
		return errReset
	}
	if st.n > 0 && st.gap > 0 && !sleep(st.ctx, &st.t, st.gap) {
		return st.ctx.Err()
	}
	st.n++
	return nil
}

// send writes and flushes one event.
func (st *streamer) send(b []byte) error { return writeFlush(st.w, st.rc, b) }

// end releases the interval timer; the caller passes the stream's result
// to Server.finish.
func (st *streamer) end() {
	if st.t != nil {
		st.t.Stop()
	}
}

// inject applies the latency directive and then a reset, hang or status
// directive, answering in format f; it reports whether it answered.
func (s *Server) inject(w http.ResponseWriter, ctx context.Context, p *params, f format) bool {
	if p.latency > 0 {
		var t *time.Timer
		ok := sleep(ctx, &t, p.latency)
		t.Stop()
		if !ok {
			s.abort()
		}
	}
	switch {
	case p.fault == faultReset:
		s.reset(w)
		return true
	case p.fault == faultHang:
		<-ctx.Done()
		s.abort()
	case p.status != 0:
		s.fail(w, f, p.status, "mockllm: injected "+statusText(p.status), injectedCodes[p.status])
		return true
	}
	return false
}

// statusText is http.StatusText, also naming 529 (Anthropic's "overloaded").
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	if code == 529 {
		return "Overloaded"
	}
	return "status " + strconv.Itoa(code)
}

// fail writes an error in format f. code is OpenAI's error code ("" for
// null); the other formats derive their error type from the status.
func (s *Server) fail(w http.ResponseWriter, f format, status int, msg, code string) {
	switch f {
	case anthropic:
		s.anthropicError(w, status, msg)
	case gemini, vertex:
		s.googleError(w, status, msg)
	case bedrock:
		s.bedrockError(w, status, msg, "")
	default:
		if status == http.StatusTooManyRequests {
			w.Header()["Retry-After"] = []string{"1"}
		}
		s.writeError(w, status, msg, code)
	}
}

// writeJSONError writes an error body built in a pooled buffer.
func (s *Server) writeJSONError(w http.ResponseWriter, status int, b []byte) {
	s.errors.Add(1)
	s.finish(s.writeBody(w, status, b, false))
}
