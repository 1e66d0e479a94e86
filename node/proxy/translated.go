package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// exchange is one client request as the attempts see it: the raw body and
// its scanned fields, and — decoded once, when the first attempt needs it —
// the canonical chat request.
type exchange struct {
	body []byte
	// req is a copy, not a pointer to the caller's: the translators'
	// interface calls make the escape analysis leak what x points to.
	req routing.Request

	chat    *translate.ChatRequest
	chatErr error
	decoded bool
}

// canonical decodes the client's request with its inbound format.
func (x *exchange) canonical(ep routing.Endpoint) (*translate.ChatRequest, error) {
	if !x.decoded {
		x.decoded = true
		x.chat, x.chatErr = inboundOf(ep).DecodeRequest(x.body)
	}
	return x.chat, x.chatErr
}

// inboundOf returns the translator of an endpoint's client format.
func inboundOf(ep routing.Endpoint) translate.Inbound {
	switch ep {
	case routing.EndpointMessages:
		return translate.AnthropicInbound
	case routing.EndpointResponses:
		return translate.ResponsesInbound
	case routing.EndpointGemini:
		return translate.GeminiInbound
	case routing.EndpointCompletions:
		return translate.CompletionsInbound
	default:
		return translate.OpenAIInbound
	}
}

// providerOf returns the translator of a provider kind's wire format.
func providerOf(kind string) translate.Provider {
	switch kind {
	case routing.ProviderAnthropic:
		return translate.Anthropic
	case routing.ProviderGemini:
		return translate.Gemini
	case routing.ProviderBedrock:
		return translate.Bedrock
	default:
		return translate.OpenAIChat
	}
}

// targetOf describes d for a translator.
func targetOf(d *raftstore.Deployment, requested string) *translate.Target {
	return &translate.Target{Provider: d.Provider, BaseURL: d.BaseURL, UpstreamModel: upstreamModel(d, requested),
		Credential: d.Credential, Options: d.Options}
}

// translation is how one attempt translates: the client's and the
// provider's formats, the canonical request, and the tool names shortened
// for the provider (nil: none).
type translation struct {
	prov  translate.Provider
	in    translate.Inbound
	creq  *translate.ChatRequest
	names map[string]string
}

// tryTranslated serves a request whose client format differs from the
// deployment's wire format, through the canonical chat form.
func (h *Handler) tryTranslated(w http.ResponseWriter, r *http.Request, rec *Record, rt *raftstore.Route, d *raftstore.Deployment, x *exchange) *failure {
	tr, hreq, f := h.translatedRequest(w, rec, d, x)
	if f != nil {
		return f
	}
	ctx, timeout := h.deadline(r, rec, d)
	defer ctx.end()
	timer, timedOut := ctx.timer, &ctx.timedOut
	hreq = hreq.WithContext(ctx)
	transport := h.transport
	if d.Provider == routing.ProviderDemo {
		transport = demoTransport{}
	}
	resp, f := h.send(r, rec, d, transport, hreq, tr.prov, timedOut, timeout)
	if f != nil || resp == nil {
		return f
	}
	defer resp.Body.Close()
	if tr.creq.Stream {
		return h.streamTranslated(w, r, rec, resp, &tr, d, attemptClock{timer, timedOut})
	}
	return h.translatedAnswer(w, r, rec, resp, &tr, d, x)
}

// send sends an attempt's request. An error answer, parsed by prov, is
// returned as a failure, and a nil response with a nil failure means the
// client went away.
func (h *Handler) send(r *http.Request, rec *Record, d *raftstore.Deployment, transport http.RoundTripper, hreq *http.Request,
	prov translate.Provider, timedOut *atomic.Bool, timeout time.Duration) (*http.Response, *failure) {
	sent := time.Now()
	resp, err := transport.RoundTrip(hreq)
	if err != nil {
		return nil, h.transportFailure(r, rec, d, err, timedOut.Load(), timeout)
	}
	rec.UpstreamLatency = time.Since(sent)
	if resp.StatusCode >= 300 {
		data, _ := readAll(resp.Body, nil, maxErrorBytes)
		resp.Body.Close()
		f := upstreamFailure(prov.ParseError(resp.StatusCode, resp.Header, data))
		f.retryAfter = resp.Header.Get("Retry-After")
		return nil, f
	}
	return resp, nil
}

// readAnswer reads a whole answer. It returns false when that failed (f),
// or the client went away (f nil).
func (h *Handler) readAnswer(r *http.Request, rec *Record, resp *http.Response, d *raftstore.Deployment) ([]byte, *failure, bool) {
	data, err := readAll(resp.Body, nil, maxResponseBytes)
	if err == nil {
		return data, nil, true
	}
	if r.Context().Err() != nil {
		rec.Status = statusClientClosed
		return nil, nil, false
	}
	return nil, errAnswerBroke(d, err), false
}

// translatedRequest decodes the client's request and builds the
// provider's.
func (h *Handler) translatedRequest(w http.ResponseWriter, rec *Record, d *raftstore.Deployment, x *exchange) (translation, *http.Request, *failure) {
	tr := translation{in: inboundOf(rec.Endpoint), prov: providerOf(d.Provider)}
	creq, err := x.canonical(rec.Endpoint)
	if err != nil {
		return tr, nil, &failure{kind: translate.KindInvalidRequest, err: asError(err)}
	}
	tr.creq = creq
	if rec.Endpoint == routing.EndpointResponses {
		tr.in = translate.ResponsesInboundFor(creq) // echoes the request's settings
		h.noteDroppedTools(w, rec, creq)
	}
	if rec.Reservation != nil && creq.OutputLimit() <= 0 {
		// The budget reservation assumed OutputCap (see estimate).
		limit := h.cfg.OutputCap
		creq.MaxTokens = &limit
	}
	t := targetOf(d, x.req.Model)
	if d.Provider == routing.ProviderDemo {
		t.BaseURL = demoBaseURL
	}
	// Tool names over 64 bytes (Anthropic allows them; the others do not)
	// go upstream shortened and come back as the client's.
	sreq := creq
	if d.Provider != routing.ProviderAnthropic {
		sreq, tr.names = translate.ShortenToolNames(creq)
	}
	hreq, err := tr.prov.NewRequest(sreq, t, creq.Stream)
	if err != nil {
		e := asError(err)
		if e.Kind == translate.KindInvalidRequest {
			// This provider cannot take the request; another may.
			return tr, nil, &failure{kind: kindUnsupported, err: e}
		}
		return tr, nil, &failure{kind: translate.KindAuth, err: e, cools: true}
	}
	return tr, hreq, nil
}

// translatedAnswer relays a whole (non-streaming) answer in the client's
// format.
func (h *Handler) translatedAnswer(w http.ResponseWriter, r *http.Request, rec *Record, resp *http.Response,
	tr *translation, d *raftstore.Deployment, x *exchange) *failure {
	data, f, ok := h.readAnswer(r, rec, resp, d)
	if !ok {
		return f
	}
	cresp, err := tr.prov.ParseResponse(data, x.req.Model)
	if err != nil {
		return upstreamFailure(asBadResponse(err, d))
	}
	if tr.names != nil {
		for i := range cresp.Choices {
			translate.RestoreToolNames(cresp.Choices[i].Message.ToolCalls, tr.names)
		}
	}
	out, err := tr.in.EncodeResponse(cresp)
	if err != nil {
		return upstreamFailure(asBadResponse(err, d))
	}
	rec.Status = http.StatusOK
	rec.Usage = usageOf(cresp.Usage)
	h.answer(w, rec, d, contentTypeJSON, http.StatusOK, out)
	return nil
}

// streamTranslated relays an upstream stream as the client format's
// events.
func (h *Handler) streamTranslated(w http.ResponseWriter, r *http.Request, rec *Record, resp *http.Response,
	tr *translation, d *raftstore.Deployment, clk attemptClock) *failure {
	s := &translatedStream{}
	s.io.init(resp.Body, w)
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(&s.io.fr)
	defer func() {
		br.Reset(nil)
		readerPool.Put(br)
		s.io.release()
	}()
	c := &s.codec
	c.dec, c.names, c.d = tr.prov.NewStreamDecoder(br, rec.Model), tr.names, d
	c.enc = tr.in.NewStreamEncoder(&s.io.cw, rec.Model)
	translate.SetIncludeUsage(c.enc, wantsUsage(tr.creq))
	return h.relay(w, r, rec, d, clk, upstreamStream{io: &s.io, codec: c, contentType: contentTypeEventStream, status: http.StatusOK})
}

// translatedStream holds what a translated stream needs.
type translatedStream struct {
	io    streamIO
	codec translatedCodec
}

// translatedCodec is the streamCodec of a translated stream: the
// provider's decoder reads canonical chunks, the client format's encoder
// writes them. The stream ended properly once a finish reason arrived.
type translatedCodec struct {
	dec      translate.StreamDecoder
	enc      translate.StreamEncoder
	names    map[string]string // tool names to restore (nil: none)
	d        *raftstore.Deployment
	c        *translate.Chunk
	pending  error // the error that came with the current chunk
	begun    bool
	usage    *translate.Usage
	finished bool // a finish reason arrived: the answer is whole
}

func (t *translatedCodec) next() error {
	if t.pending != nil {
		err := t.pending
		t.pending, t.c = nil, nil
		return err
	}
	for {
		c, err := t.dec.Next()
		switch {
		case !t.begun && err != nil && !errors.Is(err, io.EOF):
			return err
		case !t.begun && c == nil && err == nil:
			return io.ErrUnexpectedEOF // a 200 with an empty stream: nothing was answered
		case c != nil:
			t.begun = true
			t.c, t.pending = c, err
			return nil
		case err != nil:
			return err
		}
	}
}

func (*translatedCodec) refusal() *translate.Error { return nil }

func (t *translatedCodec) scan(rec *Record) bool {
	if t.c.Usage != nil {
		t.usage = t.c.Usage
		rec.Usage = usageOf(t.c.Usage)
	}
	for i, ch := range t.c.Choices {
		if ch.FinishReason != nil {
			t.finished = true
		}
		if t.names != nil {
			translate.RestoreToolNames(t.c.Choices[i].Delta.ToolCalls, t.names)
		}
	}
	return false
}

func (t *translatedCodec) write(io.Writer) error { return t.enc.WriteChunk(t.c) }
func (t *translatedCodec) whole() bool           { return t.finished }
func (t *translatedCodec) close(io.Writer) error { return t.enc.Close(t.usage) }

func (t *translatedCodec) fail(_ io.Writer, err error) {
	var te *translate.Error
	if !errors.As(err, &te) {
		te = asBadResponse(err, t.d)
	}
	_ = t.enc.Fail(te)
}

// wantsUsage reports whether an OpenAI-format client asked for the usage
// chunk.
func wantsUsage(creq *translate.ChatRequest) bool {
	return creq.StreamOptions != nil && creq.StreamOptions.IncludeUsage
}

func usageOf(u *translate.Usage) routing.Usage {
	if u == nil {
		return routing.Usage{}
	}
	return routing.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens: u.PromptTokens + u.CompletionTokens, CachedTokens: u.Cached(),
		CacheWriteTokens: u.CacheCreationTokens, Present: true}
}

// asError turns a translator's error into a *translate.Error.
func asError(err error) *translate.Error {
	var te *translate.Error
	if errors.As(err, &te) {
		return te
	}
	return translate.Invalid("", "%v", err)
}

func asBadResponse(err error, d *raftstore.Deployment) *translate.Error {
	var te *translate.Error
	if errors.As(err, &te) {
		return te
	}
	return translate.BadResponse(d.Provider, "%v", err)
}

// --- embeddings on Gemini ----------------------------------------------------

func (h *Handler) attemptGeminiEmbeddings(w http.ResponseWriter, r *http.Request, rec *Record, d *raftstore.Deployment, x *exchange) *failure {
	t := targetOf(d, x.req.Model)
	hreq, inputs, err := translate.GeminiEmbeddingsRequest(x.body, t)
	if err != nil {
		e := asError(err)
		return &failure{kind: translate.KindInvalidRequest, err: e}
	}
	ctx, timeout := h.deadline(r, rec, d)
	defer ctx.end()
	timedOut := &ctx.timedOut
	resp, f := h.send(r, rec, d, h.transport, hreq.WithContext(ctx), translate.Gemini, timedOut, timeout)
	if f != nil || resp == nil {
		return f
	}
	defer resp.Body.Close()
	data, f, ok := h.readAnswer(r, rec, resp, d)
	if !ok {
		return f
	}
	out, u, err := translate.GeminiEmbeddingsResponseAs(data, x.req.Model, inputs, int64(len(x.body)/4), translate.EmbeddingsBase64(x.body))
	if err != nil {
		return upstreamFailure(asBadResponse(err, d))
	}
	rec.Status = http.StatusOK
	rec.Usage = usageOf(u)
	h.answer(w, rec, d, contentTypeJSON, http.StatusOK, out)
	return nil
}

// --- /v1/messages/count_tokens ----------------------------------------------

// countingCaller admits a token-count request (Anthropic's and Gemini's):
// POST only, with a valid key. It answers a refusal itself with fail and
// then returns a nil key.
func countingCaller(w http.ResponseWriter, r *http.Request, src StateSource, fail func(apiError)) (*raftstore.State, *raftstore.Key) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(errMethod(http.MethodPost))
		return nil, nil
	}
	st := src.State()
	key, aerr := authenticate(r, st)
	if key == nil {
		fail(aerr)
	}
	return st, key
}

// countingModelAllowed reports whether key may count tokens for model (a
// known route it may use); it answers the refusal itself with fail.
func countingModelAllowed(st *raftstore.State, key *raftstore.Key, model string, fail func(apiError)) bool {
	route := st.Resolve(model)
	if !keyAllows(key, model, route) {
		fail(errModelNotAllowed(model))
		return false
	}
	if route == nil {
		fail(errModelNotFound(model))
		return false
	}
	return true
}

// countTokens answers Anthropic's token counting endpoint with the
// gateway's estimate (see translate.AnthropicCountTokens); it needs a valid
// key that may use the model, and sends nothing upstream.
func (h *Handler) countTokens(w http.ResponseWriter, r *http.Request) {
	fail := func(e apiError) { writeErrorIn(w, routing.EndpointMessages, e.toError(translate.KindOther)) }
	st, key := countingCaller(w, r, h.cfg.State, fail)
	if key == nil {
		return
	}
	body, err := h.readBodyIn(w, r, nil)
	if err != nil {
		fail(h.bodyError(w, err))
		return
	}
	req, err := routing.ScanRequest(body)
	if err != nil {
		fail(errMalformed)
		return
	}
	if req.Model == "" {
		fail(errNoModel)
		return
	}
	if !countingModelAllowed(st, key, req.Model, fail) {
		return
	}
	n, err := translate.AnthropicCountTokens(body)
	if err != nil {
		writeErrorIn(w, routing.EndpointMessages, asError(err))
		return
	}
	out := translate.AnthropicCountTokensResponse(n)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// --- the demo provider for other client formats ------------------------------

// demoBaseURL is the API root translated requests to a demo deployment
// name; demoTransport answers them in-process.
const demoBaseURL = "http://demo.tollgate.invalid/v1"

// demoTransport serves OpenAI chat requests with routing.ServeDemo, so
// that clients of the Anthropic and Responses formats get the offline demo
// through the same translation as a real upstream.
type demoTransport struct{}

func (demoTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	sr, err := routing.ScanRequest(body)
	if err != nil {
		return nil, err
	}
	rw := &demoWriter{header: http.Header{}}
	routing.ServeDemo(rw, routing.EndpointChat, sr.Model, body, &sr, nil)
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	return &http.Response{StatusCode: rw.status, Header: rw.header, Body: io.NopCloser(&rw.body),
		ContentLength: int64(rw.body.Len()), Request: req}, nil
}

type demoWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (d *demoWriter) Header() http.Header { return d.header }

func (d *demoWriter) Write(p []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	return d.body.Write(p)
}

func (d *demoWriter) WriteHeader(code int) {
	if d.status == 0 {
		d.status = code
	}
}
