package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	if d.Provider == routing.ProviderAzureOpenAI || int(ep) >= len(target{}.urls) {
		return newParsedRequest(ctx, d, ep, body)
	}
	t := targetFor(d)
	u := t.urls[ep]
	if u == nil {
		putBuf(body)
		return nil, t.errs[ep]
	}
	br := &bodyReader{buf: body}
	br.r.Reset(body.b)
	// The URL is copied into the one an empty URL parses to: nothing to
	// parse, and no request shares another's.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", br)
	if err != nil {
		br.Close()
		return nil, err
	}
	*req.URL = *u
	req.Host = u.Host
	req.ContentLength = int64(len(body.b))
	req.Header["Content-Type"] = contentTypeJSON
	if t.auth != nil {
		req.Header["Authorization"] = t.auth
	}
	return req, nil
}

// newParsedRequest is newUpstreamRequest with the URL made and parsed
// for the request: for Azure OpenAI (its URL depends on its options).
func newParsedRequest(ctx context.Context, d *raftstore.Deployment, ep routing.Endpoint, body *buffer) (*http.Request, error) {
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
	limit := maxResponseBytes
	if resp.StatusCode >= 300 {
		limit = maxErrorBytes
	}
	in := bodyBuf(resp.ContentLength, int64(limit))
	defer putBuf(in)
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
		cts = resp.Header["Content-Type"][:1:1] // the upstream's own value: nothing else reads it now
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
	return len(b) > 0 && b[0] == '{' && routing.ValidJSON(b)
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
	vs := new([2]string) // the two header values made here, in one allocation
	vs[0], vs[1] = d.ID, strconv.Itoa(len(data))
	hdr["X-Tollgate-Deployment"] = vs[0:1:1]
	if contentType != nil {
		hdr["Content-Type"] = contentType
	}
	hdr["Content-Length"] = vs[1:2:2]
	hdr["Date"] = dateHeader(time.Now())
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
	hdr["Cache-Control"] = noCache
	hdr["X-Accel-Buffering"] = accelNo
	hdr["Date"] = dateHeader(time.Now())
	w.WriteHeader(status)
	rec.Status = status
	rec.FirstByte = time.Since(rec.Start)
}

// Header values shared by every response: net/http copies them when it
// writes the headers, and nothing modifies them.
var noCache, accelNo = []string{"no-cache"}, []string{"no"}

// httpDate is the Date header of this second. net/http formats one per
// response when the handler sets none: 1.6% of the node's CPU at 32
// clients.
var httpDate atomic.Pointer[dateValue]

type dateValue struct {
	sec int64
	v   []string
}

// dateHeader returns the Date header value for now, formatted once a second.
func dateHeader(now time.Time) []string {
	sec := now.Unix()
	if d := httpDate.Load(); d != nil && d.sec == sec {
		return d.v
	}
	d := &dateValue{sec: sec, v: []string{now.UTC().Format(http.TimeFormat)}}
	httpDate.Store(d)
	return d.v
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
