package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
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

// tryTranslated serves a request whose client format differs from the
// deployment's wire format, through the canonical chat form.
func (h *Handler) tryTranslated(w http.ResponseWriter, r *http.Request, rec *Record, rt *raftstore.Route, d *raftstore.Deployment, x *exchange) *failure {
	in := inboundOf(rec.Endpoint)
	creq, err := x.canonical(rec.Endpoint)
	if err != nil {
		return &failure{kind: translate.KindInvalidRequest, err: asError(err)}
	}
	if rec.Endpoint == routing.EndpointResponses {
		in = translate.ResponsesInboundFor(creq) // echoes the request's settings
		h.noteDroppedTools(w, rec, creq)
	}
	if rec.Reservation != nil && creq.OutputLimit() <= 0 {
		// The budget reservation assumed OutputCap (see estimate).
		limit := h.cfg.OutputCap
		creq.MaxTokens = &limit
	}
	prov := providerOf(d.Provider)
	t := targetOf(d, x.req.Model)
	if d.Provider == routing.ProviderDemo {
		t.BaseURL = demoBaseURL
	}
	// Tool names over 64 bytes (Anthropic allows them; the others do not)
	// go upstream shortened and come back as the client's.
	sreq, names := creq, map[string]string(nil)
	if d.Provider != routing.ProviderAnthropic {
		sreq, names = translate.ShortenToolNames(creq)
	}
	hreq, err := prov.NewRequest(sreq, t, creq.Stream)
	if err != nil {
		e := asError(err)
		if e.Kind == translate.KindInvalidRequest {
			// This provider cannot take the request; another may.
			return &failure{kind: kindUnsupported, err: e}
		}
		return &failure{kind: translate.KindAuth, err: e, cools: true}
	}
	ctx, cancel, timer, timedOut, timeout := h.deadline(r, rec, d)
	defer cancel()
	defer timer.Stop()
	hreq = hreq.WithContext(ctx)
	transport := h.transport
	if d.Provider == routing.ProviderDemo {
		transport = demoTransport{}
	}
	sent := time.Now()
	resp, err := transport.RoundTrip(hreq)
	if err != nil {
		return h.transportFailure(r, rec, d, err, timedOut.Load(), timeout)
	}
	defer resp.Body.Close()
	rec.UpstreamLatency = time.Since(sent)
	if resp.StatusCode >= 300 {
		data, _ := readAll(resp.Body, nil, maxErrorBytes)
		f := upstreamFailure(prov.ParseError(resp.StatusCode, resp.Header, data))
		f.retryAfter = resp.Header.Get("Retry-After")
		return f
	}
	if creq.Stream {
		return h.streamTranslated(w, r, rec, resp, prov, in, creq, d, timer, timedOut, names)
	}
	data, err := readAll(resp.Body, nil, maxResponseBytes)
	if err != nil {
		if r.Context().Err() != nil {
			rec.Status = statusClientClosed
			return nil
		}
		return errAnswerBroke(d, err)
	}
	cresp, err := prov.ParseResponse(data, x.req.Model)
	if err != nil {
		return upstreamFailure(asBadResponse(err, d))
	}
	if names != nil {
		for i := range cresp.Choices {
			translate.RestoreToolNames(cresp.Choices[i].Message.ToolCalls, names)
		}
	}
	out, err := in.EncodeResponse(cresp)
	if err != nil {
		return upstreamFailure(asBadResponse(err, d))
	}
	rec.Status = http.StatusOK
	rec.Usage = usageOf(cresp.Usage)
	h.answer(w, rec, d, contentTypeJSON, http.StatusOK, out)
	return nil
}

// streamTranslated relays an upstream stream as the client format's
// events. Nothing is written until the first chunk decodes, so a stream
// that fails or stays silent past the first-token timeout may be retried.
func (h *Handler) streamTranslated(w http.ResponseWriter, r *http.Request, rec *Record, resp *http.Response,
	prov translate.Provider, in translate.Inbound, creq *translate.ChatRequest, d *raftstore.Deployment,
	timer *time.Timer, timedOut *atomic.Bool, names map[string]string) *failure {
	if t := firstTokenTimeout(rec, d); t > 0 {
		timer.Reset(t)
	}
	// The decoder reads the upstream through a buffer, and the buffer reads
	// through fr: what the client was written is flushed right before the
	// gateway waits on the upstream, not after every chunk. Chunks that
	// arrived together leave in one write, and none waits unflushed.
	fr := &flushReader{r: resp.Body}
	dec := prov.NewStreamDecoder(bufio.NewReaderSize(fr, streamReadBuffer), rec.Model)
	first, err := dec.Next()
	if err != nil && !errors.Is(err, io.EOF) {
		if r.Context().Err() != nil {
			rec.Status = statusClientClosed
			return nil
		}
		if timedOut.Load() {
			return h.errNoFirstToken(rec, d)
		}
		var te *translate.Error
		if errors.As(err, &te) {
			return upstreamFailure(te)
		}
		return errEndedEarly(d, err)
	}
	if first == nil { // a 200 with an empty stream: nothing was answered
		return errEndedEarly(d, io.ErrUnexpectedEOF)
	}
	if !started(timer, timedOut) {
		return h.errNoFirstToken(rec, d)
	}
	startStream(w, rec, d, contentTypeEventStream, http.StatusOK)
	fr.fl, _ = w.(http.Flusher)
	flush := fr.flush
	cw := &clientWriter{w: w, fr: fr}
	enc := in.NewStreamEncoder(cw, rec.Model)
	translate.SetIncludeUsage(enc, wantsUsage(creq))
	var usage *translate.Usage
	finished := false // a finish reason arrived: the answer is whole
	c := first
	for {
		if c != nil {
			if c.Usage != nil {
				usage = c.Usage
				rec.Usage = usageOf(c.Usage)
			}
			for i, ch := range c.Choices {
				if ch.FinishReason != nil {
					finished = true
				}
				if names != nil {
					translate.RestoreToolNames(c.Choices[i].Delta.ToolCalls, names)
				}
			}
			if werr := enc.WriteChunk(c); werr != nil || cw.err != nil {
				rec.Status = statusClientClosed
				return nil
			}
		}
		if err != nil {
			break
		}
		c, err = dec.Next()
	}
	if errors.Is(err, io.EOF) && !finished {
		// The stream ended without saying why the answer stopped: it was
		// cut off, and must not look complete to the client.
		err = translate.BadResponse(d.Provider, "the stream ended before the answer was finished")
	}
	if !errors.Is(err, io.EOF) {
		if r.Context().Err() != nil {
			rec.Status = statusClientClosed
			return nil
		}
		rec.Status = http.StatusBadGateway
		h.log.Warn("upstream stream broke", "request", rec.RequestID, "deployment", rec.Deployment, "err", err)
		h.commit(rec)
		var te *translate.Error
		if !errors.As(err, &te) {
			te = asBadResponse(err, d)
		}
		_ = enc.Fail(te)
		flush()
		panic(http.ErrAbortHandler)
	}
	h.commit(rec) // before the stream's last events reach the client
	_ = enc.Close(usage)
	flush()
	return nil
}

// wantsUsage reports whether an OpenAI-format client asked for the usage
// chunk.
func wantsUsage(creq *translate.ChatRequest) bool {
	return creq.StreamOptions != nil && creq.StreamOptions.IncludeUsage
}

// clientWriter remembers the first error writing to the client.
type clientWriter struct {
	w   io.Writer
	fr  *flushReader // told that there is something to flush
	err error
}

func (c *clientWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.err = err
	if n > 0 && c.fr != nil {
		c.fr.dirty = true
	}
	return n, err
}

// streamReadBuffer is the buffer a translated stream's decoder reads the
// upstream through.
const streamReadBuffer = 16 << 10

// flushReader reads the upstream body of a translated stream. Its Read is
// called only when the buffer above it is empty, that is when the gateway
// is about to wait on the upstream: it flushes the client first if
// anything was written since the last flush.
type flushReader struct {
	r     io.Reader
	fl    http.Flusher // nil until the stream has started
	dirty bool
}

func (f *flushReader) Read(p []byte) (int, error) {
	f.flush()
	return f.r.Read(p)
}

func (f *flushReader) flush() {
	if f.dirty && f.fl != nil {
		f.fl.Flush()
		f.dirty = false
	}
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

// --- Anthropic clients of Anthropic deployments: native pass-through ------

// attemptAnthropic passes a Messages request through to an Anthropic
// deployment with only the model renamed, so that everything Anthropic
// offers (thinking, cache control, documents) reaches it, and reads the
// usage from the answer on the way back.
func (h *Handler) attemptAnthropic(w http.ResponseWriter, r *http.Request, rec *Record, d *raftstore.Deployment, x *exchange) *failure {
	ctx, cancel, timer, timedOut, timeout := h.deadline(r, rec, d)
	defer cancel()
	defer timer.Stop()
	out := routing.RewriteRequest(nil, x.body, &x.req, upstreamModel(d, x.req.Model), false)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, d.BaseURL+"/messages", bytes.NewReader(out))
	if err != nil {
		return failureOf(apiError{http.StatusBadGateway, typeUpstream, "bad_upstream_url", "", err.Error()}, translate.KindAuth)
	}
	hreq.Header["Content-Type"] = contentTypeJSON
	if d.Credential != "" {
		hreq.Header["X-Api-Key"] = []string{d.Credential}
	}
	version := r.Header.Get("Anthropic-Version")
	if version == "" {
		version = "2023-06-01"
	}
	hreq.Header["Anthropic-Version"] = []string{version}
	if b := r.Header.Values("Anthropic-Beta"); len(b) > 0 {
		hreq.Header["Anthropic-Beta"] = b
	}
	sent := time.Now()
	resp, err := h.transport.RoundTrip(hreq)
	if err != nil {
		return h.transportFailure(r, rec, d, err, timedOut.Load(), timeout)
	}
	defer resp.Body.Close()
	rec.UpstreamLatency = time.Since(sent)
	if resp.StatusCode >= 300 {
		data, _ := readAll(resp.Body, nil, maxErrorBytes)
		f := upstreamFailure(translate.Anthropic.ParseError(resp.StatusCode, resp.Header, data))
		f.retryAfter = resp.Header.Get("Retry-After")
		return f
	}
	if !isEventStream(resp.Header.Get("Content-Type")) {
		data, err := readAll(resp.Body, nil, maxResponseBytes)
		if err != nil {
			if r.Context().Err() != nil {
				rec.Status = statusClientClosed
				return nil
			}
			return errAnswerBroke(d, err)
		}
		var body struct {
			Usage *anthropicUsage `json:"usage"`
		}
		if !validAnswer(data) || json.Unmarshal(data, &body) != nil {
			return errBadAnswer(d, data)
		}
		if body.Usage != nil {
			rec.Usage = body.Usage.usage()
		}
		rec.Status = http.StatusOK
		h.answer(w, rec, d, contentTypeJSON, http.StatusOK, data)
		return nil
	}
	// A stream: relay it event by event, reading usage from message_start
	// and message_delta, and record before message_stop goes out.
	if t := firstTokenTimeout(rec, d); t > 0 {
		timer.Reset(t)
	}
	sse := translate.NewSSEReader(resp.Body)
	var u anthropicUsage
	begun, stopped := false, false
	fl, _ := w.(http.Flusher)
	var buf []byte
	for {
		ev, err := sse.Next()
		if err != nil {
			if !begun {
				if r.Context().Err() != nil {
					rec.Status = statusClientClosed
					return nil
				}
				if timedOut.Load() {
					return h.errNoFirstToken(rec, d)
				}
				return errEndedEarly(d, err)
			}
			if errors.Is(err, io.EOF) && stopped {
				h.commit(rec)
				return nil
			}
			if r.Context().Err() != nil {
				rec.Status = statusClientClosed
				return nil
			}
			rec.Status = http.StatusBadGateway
			h.commit(rec)
			panic(http.ErrAbortHandler)
		}
		if !begun {
			if ev.Event == "error" {
				return upstreamFailure(translate.AnthropicEventError(ev.Data))
			}
			begun = true
			if !started(timer, timedOut) {
				return h.errNoFirstToken(rec, d)
			}
			startStream(w, rec, d, contentTypeEventStream, http.StatusOK)
		}
		switch ev.Event {
		case "message_start":
			var m struct {
				Message struct {
					Usage anthropicUsage `json:"usage"`
				} `json:"message"`
			}
			if json.Unmarshal(ev.Data, &m) == nil {
				u = m.Message.Usage
				rec.Usage = u.usage()
			}
		case "message_delta":
			var m struct {
				Usage anthropicUsage `json:"usage"`
			}
			if json.Unmarshal(ev.Data, &m) == nil {
				// message_delta's counts are cumulative; the input and
				// cache counts may be absent (older API versions).
				u.OutputTokens = m.Usage.OutputTokens
				if m.Usage.InputTokens > 0 {
					u.InputTokens = m.Usage.InputTokens
				}
				if m.Usage.CacheReadInputTokens > 0 {
					u.CacheReadInputTokens = m.Usage.CacheReadInputTokens
				}
				if m.Usage.CacheCreationInputTokens > 0 {
					u.CacheCreationInputTokens = m.Usage.CacheCreationInputTokens
				}
				rec.Usage = u.usage()
			}
		case "message_stop":
			stopped = true
			h.commit(rec)
		}
		buf = buf[:0]
		if ev.Event != "" {
			buf = append(append(append(buf, "event: "...), ev.Event...), '\n')
		}
		buf = append(append(append(buf, "data: "...), ev.Data...), "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			rec.Status = statusClientClosed
			return nil
		}
		if fl != nil && !sse.EventBuffered() { // else: one write with the next
			fl.Flush()
		}
	}
}

type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func (a anthropicUsage) usage() routing.Usage {
	p := a.InputTokens + a.CacheReadInputTokens + a.CacheCreationInputTokens
	return routing.Usage{PromptTokens: p, CompletionTokens: a.OutputTokens, TotalTokens: p + a.OutputTokens,
		CachedTokens: a.CacheReadInputTokens, CacheWriteTokens: a.CacheCreationInputTokens, Present: true}
}

// --- embeddings on Gemini ----------------------------------------------------

func (h *Handler) attemptGeminiEmbeddings(w http.ResponseWriter, r *http.Request, rec *Record, d *raftstore.Deployment, x *exchange) *failure {
	t := targetOf(d, x.req.Model)
	hreq, inputs, err := translate.GeminiEmbeddingsRequest(x.body, t)
	if err != nil {
		e := asError(err)
		return &failure{kind: translate.KindInvalidRequest, err: e}
	}
	ctx, cancel, timer, timedOut, timeout := h.deadline(r, rec, d)
	defer cancel()
	defer timer.Stop()
	sent := time.Now()
	resp, err := h.transport.RoundTrip(hreq.WithContext(ctx))
	if err != nil {
		return h.transportFailure(r, rec, d, err, timedOut.Load(), timeout)
	}
	defer resp.Body.Close()
	rec.UpstreamLatency = time.Since(sent)
	data, rerr := readAll(resp.Body, nil, maxResponseBytes)
	if resp.StatusCode >= 300 {
		f := upstreamFailure(translate.Gemini.ParseError(resp.StatusCode, resp.Header, data))
		f.retryAfter = resp.Header.Get("Retry-After")
		return f
	}
	if rerr != nil {
		if r.Context().Err() != nil {
			rec.Status = statusClientClosed
			return nil
		}
		return errAnswerBroke(d, rerr)
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

// countTokens answers Anthropic's token counting endpoint with the
// gateway's estimate (see translate.AnthropicCountTokens); it needs a valid
// key that may use the model, and sends nothing upstream.
func (h *Handler) countTokens(w http.ResponseWriter, r *http.Request) {
	fail := func(e apiError) { writeErrorIn(w, routing.EndpointMessages, e.toError(translate.KindOther)) }
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(errMethod(http.MethodPost))
		return
	}
	st := h.cfg.State.State()
	key, aerr := authenticate(r, st)
	if key == nil {
		fail(aerr)
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
	route := st.Resolve(req.Model)
	if !keyAllows(key, req.Model, route) {
		fail(errModelNotAllowed(req.Model))
		return
	}
	if route == nil {
		fail(errModelNotFound(req.Model))
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
