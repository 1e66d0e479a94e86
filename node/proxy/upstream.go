package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// maxResponseBytes bounds a buffered (non-streaming) upstream response.
const maxResponseBytes = 64 << 20

var contentTypeJSON = []string{"application/json"}

// bodyReader hands a pooled buffer to the transport and returns it to the
// pool when the transport closes the body, which it may do after
// RoundTrip has returned.
// The HTTP/2 transport may Close in another goroutine while a Read is
// under way: the mutex keeps the buffer out of the pool until no Read
// can touch it.
type bodyReader struct {
	mu     sync.Mutex
	r      bytes.Reader
	buf    *buffer
	closed bool
}

func (b *bodyReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	return b.r.Read(p)
}

func (b *bodyReader) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		putBuf(b.buf)
	}
	return nil
}

func newUpstreamRequest(ctx context.Context, d *raftstore.Deployment, ep routing.Endpoint, body *buffer) (*http.Request, error) {
	br := &bodyReader{buf: body}
	br.r.Reset(body.b)
	u := d.BaseURL + ep.Path()
	if d.Provider == routing.ProviderAzureOpenAI {
		u = translate.OpenAIURL(targetOf(d, ""), ep.Path())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, br)
	if err != nil {
		br.Close()
		return nil, err
	}
	req.ContentLength = int64(len(body.b))
	req.Header["Content-Type"] = contentTypeJSON
	if d.Credential != "" {
		if d.Provider == routing.ProviderAzureOpenAI {
			req.Header["Api-Key"] = []string{d.Credential}
		} else {
			req.Header["Authorization"] = []string{"Bearer " + d.Credential}
		}
	}
	return req, nil
}

// maxErrorBytes bounds an upstream's error answer.
const maxErrorBytes = 1 << 20

// buffered relays a non-streaming upstream response. An error answer,
// or a body that broke off, is returned as a failure (nothing written).
func (h *Handler) buffered(w http.ResponseWriter, r *http.Request, rec *Record, resp *http.Response,
	d *raftstore.Deployment, timedOut *atomic.Bool, timeout time.Duration) *failure {
	in := getBuf()
	defer putBuf(in)
	limit := maxResponseBytes
	if resp.StatusCode >= 300 {
		limit = maxErrorBytes
	}
	data, err := readAll(resp.Body, in.b[:0], limit)
	in.b = data
	if err != nil {
		switch {
		case r.Context().Err() != nil:
			rec.Status = statusClientClosed
			return nil
		case timedOut.Load():
			return h.timeoutFailure(rec, d, timeout, "did not finish its answer")
		case resp.StatusCode < 300:
			return errAnswerBroke(d, err)
		}
		// An error answer that broke off: classify what arrived.
	}
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode >= 300 {
		e := translate.ParseOpenAIError(resp.StatusCode, data)
		if !isJSONType(ct) {
			e.Type, e.Code = typeUpstream, "upstream_error"
			e.Message = "The upstream deployment '" + d.ID + "' answered " + strconv.Itoa(resp.StatusCode) + ": " + snippetOf(data)
		}
		f := upstreamFailure(e)
		f.retryAfter = resp.Header.Get("Retry-After")
		if e.Kind != translate.KindAuth {
			f.raw, f.rawType = append([]byte(nil), data...), ct
		}
		return f
	}
	if !validAnswer(data) {
		return errBadAnswer(d, data)
	}
	rec.Status = resp.StatusCode
	rec.Usage = routing.UsageFromBody(data)
	var cts []string
	if ct != "" {
		cts = []string{ct}
	}
	h.answer(w, rec, d, cts, resp.StatusCode, data)
	return nil
}

var contentTypeEventStream = []string{"text/event-stream"}

// validAnswer reports whether a successful answer is a whole JSON object,
// as every endpoint's answer is: an empty, truncated or non-JSON body must
// reach neither the client nor the ledger.
func validAnswer(data []byte) bool {
	b := bytes.TrimLeft(data, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// errBadAnswer: a successful status with a body that is not a whole JSON
// object. Another deployment, or a retry, may answer properly.
func errBadAnswer(d *raftstore.Deployment, data []byte) *failure {
	what := "an empty body"
	if len(bytes.TrimSpace(data)) > 0 {
		what = "a body that is not a whole JSON object (" + strconv.Itoa(len(data)) + " bytes)"
	}
	return retryable(&failure{kind: translate.KindBadResponse,
		err: translate.BadResponse(d.Provider, "deployment '%s' answered 200 with %s", d.ID, what)})
}

// answer writes a whole answer of d: recorded first (h.commit), then sent.
// A nil contentType sets none.
func (h *Handler) answer(w http.ResponseWriter, rec *Record, d *raftstore.Deployment, contentType []string, status int, data []byte) {
	hdr := w.Header()
	hdr["X-Tollgate-Deployment"] = []string{d.ID}
	if contentType != nil {
		hdr["Content-Type"] = contentType
	}
	hdr["Content-Length"] = []string{strconv.Itoa(len(data))}
	rec.FirstByte = time.Since(rec.Start)
	h.commit(rec)
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// startStream writes the headers of a stream from d.
func startStream(w http.ResponseWriter, rec *Record, d *raftstore.Deployment, contentType []string, status int) {
	hdr := w.Header()
	hdr["X-Tollgate-Deployment"] = []string{d.ID}
	hdr["Content-Type"] = contentType
	hdr["Cache-Control"] = []string{"no-cache"}
	hdr["X-Accel-Buffering"] = []string{"no"}
	w.WriteHeader(status)
	rec.Status = status
	rec.FirstByte = time.Since(rec.Start)
}

// snippetOf returns the start of a non-JSON error body for a message.
func snippetOf(data []byte) string {
	s := string(bytes.TrimSpace(data))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func isJSONType(ct string) bool {
	return len(ct) >= 16 && ct[:16] == "application/json"
}

func readAll(r io.Reader, dst []byte, limit int) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		if len(dst) > limit {
			return dst, errBodyTooLarge
		}
	}
}

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

var (
	usageNullField = []byte(`,"usage":null`)
	dataPrefix     = []byte("data:")
	doneMarker     = []byte("[DONE]")
)

// stream relays a server-sent event stream event by event, flushing after
// each. When the gateway turned on include_usage itself, the usage-only
// chunk and the "usage":null members are hidden from the client. Nothing
// is written until the first line arrives: a stream that fails or stays
// silent past the deployment's first-token timeout is a failure, and
// another deployment may serve.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, rec *Record, resp *http.Response, req *routing.Request,
	d *raftstore.Deployment, timer *time.Timer, timedOut *atomic.Bool) *failure {
	if t := firstTokenTimeout(rec, d); t > 0 {
		timer.Reset(t)
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() {
		br.Reset(nil)
		readerPool.Put(br)
	}()
	// Comments and blank lines (keep-alives some servers send while the
	// model thinks) are not the first token: keep them, and wait on.
	var pre []byte
	first, ferr := br.ReadSlice('\n')
	for ferr == nil && isKeepAlive(first) && len(pre) < 64<<10 {
		pre = append(pre, first...)
		first, ferr = br.ReadSlice('\n')
	}
	if ferr != nil && ferr != bufio.ErrBufferFull && (ferr != io.EOF || len(first) == 0) {
		if r.Context().Err() != nil {
			rec.Status = statusClientClosed
			return nil
		}
		if timedOut.Load() {
			return h.errNoFirstToken(rec, d)
		}
		return errEndedEarly(d, ferr)
	}
	// The timeout covers the wait for the stream to start.
	if !started(timer, timedOut) {
		return h.errNoFirstToken(rec, d)
	}
	startStream(w, rec, d, []string{resp.Header.Get("Content-Type")}, resp.StatusCode)
	fl, _ := w.(http.Flusher)
	if len(pre) > 0 {
		if _, err := w.Write(pre); err != nil {
			rec.Status = statusClientClosed
			return nil
		}
	}
	hide := !req.IncludeUsage
	skipBlank := false
	line, err := first, ferr
	for {
		if err == bufio.ErrBufferFull {
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 {
			f := fl
			if f != nil && len(line) <= 2 && translate.EventBuffered(br) {
				// The next event is here already: one write for both. Nothing
				// waits for the network unflushed, as the flush is skipped
				// only for an event already in memory.
				f = nil
			}
			var werr error
			skipBlank, werr = h.relayLine(w, f, rec, line, hide, skipBlank)
			if werr != nil {
				rec.Status = statusClientClosed
				return nil
			}
		}
		if err != nil {
			if err != io.EOF {
				if r.Context().Err() != nil {
					rec.Status = statusClientClosed
					return nil
				}
				// The upstream broke mid-stream. Abort the client's
				// connection too, so that it sees a truncated stream rather
				// than one that ended cleanly without [DONE].
				rec.Status = http.StatusBadGateway
				h.log.Warn("upstream stream broke", "request", rec.RequestID, "deployment", rec.Deployment, "err", err)
				h.commit(rec)
				panic(http.ErrAbortHandler)
			}
			if !rec.streamDone {
				// The stream ended without [DONE]: the answer may be cut
				// short. Abort the client's connection too, so that it does
				// not take it for whole.
				rec.Status = http.StatusBadGateway
				h.log.Warn("upstream stream ended without [DONE]", "request", rec.RequestID, "deployment", rec.Deployment)
				h.commit(rec)
				if fl != nil {
					fl.Flush()
				}
				panic(http.ErrAbortHandler)
			}
			if fl != nil {
				fl.Flush()
			}
			return nil
		}
		line, err = br.ReadSlice('\n')
	}
}

// isKeepAlive reports whether an event-stream line is a comment or blank.
func isKeepAlive(line []byte) bool {
	return len(line) > 0 && (line[0] == ':' || line[0] == '\n' || line[0] == '\r')
}

// relayLine writes one line of an event stream, reading usage from data
// lines. It returns whether the next blank line must be skipped (the event
// was hidden).
func (h *Handler) relayLine(w http.ResponseWriter, fl http.Flusher, rec *Record, line []byte, hide, skipBlank bool) (bool, error) {
	content := bytes.TrimRight(line, "\r\n")
	if len(content) == 0 {
		if skipBlank {
			if fl != nil { // what came before the hidden event
				fl.Flush()
			}
			return false, nil
		}
		if _, err := w.Write(line); err != nil {
			return false, err
		}
		if fl != nil {
			fl.Flush()
		}
		return false, nil
	}
	if bytes.HasPrefix(content, dataPrefix) {
		data := bytes.TrimLeft(content[len(dataPrefix):], " ")
		if bytes.Equal(data, doneMarker) {
			rec.streamDone = true
			h.commit(rec) // before the stream's last event reaches the client
		}
		if i := bytes.Index(data, usageNullField); i >= 0 {
			if hide {
				j := len(content) - len(data) + i // data is a suffix of content, content a prefix of line
				if _, err := w.Write(line[:j]); err != nil {
					return false, err
				}
				_, err := w.Write(line[j+len(usageNullField):])
				return false, err
			}
		} else if u, usageOnly := routing.ChunkUsage(data); u.Present {
			rec.Usage = u
			if rec.Endpoint == routing.EndpointResponses {
				// response.completed (or .incomplete): the stream's last
				// event, and its proper end (Responses streams send no
				// [DONE]).
				rec.streamDone = true
				h.commit(rec)
			}
			if hide && usageOnly {
				return true, nil
			}
		}
	}
	_, err := w.Write(line)
	return false, err
}

// models lists the models the caller's key may use, in OpenAI's shape.
func (h *Handler) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, errMethod(http.MethodGet))
		return
	}
	st := h.cfg.State.State()
	key, aerr := authenticate(r, st)
	if key == nil {
		writeError(w, aerr)
		return
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"object":"list","data":[`...)
	n := 0
	add := func(name string, created int64) {
		if !key.Allows(name) {
			return
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":`...)
		b = appendJSONString(b, name)
		b = append(b, `,"object":"model","created":`...)
		b = strconv.AppendInt(b, created, 10)
		b = append(b, `,"owned_by":"tollgate"}`...)
	}
	type entry struct {
		name    string
		created int64
	}
	var all []entry
	for _, name := range st.RouteNames() {
		created := st.Route(name).Created
		all = append(all, entry{name, created})
		for _, alias := range st.RouteConfig(name).GetOptions().GetAliases() {
			all = append(all, entry{alias, created})
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	for _, e := range all {
		add(e.name, e.created)
	}
	b = append(b, "]}"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func appendBase36(b []byte, n uint64) []byte { return strconv.AppendUint(b, n, 36) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
