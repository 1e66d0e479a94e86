package proxy

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// Tracing (Config.Tracer set): one server span per request, one client
// span per upstream attempt, both with the OpenTelemetry GenAI semantic
// conventions' attributes. The client's traceparent is continued and the
// upstream request carries the attempt's. Without a tracer none of this
// runs: Record.span stays nil.

// w3c is the W3C Trace Context propagator (traceparent, tracestate).
var w3c propagation.TraceContext

// The span kinds' start options, made once.
var (
	serverKind = trace.WithSpanKind(trace.SpanKindServer)
	clientKind = trace.WithSpanKind(trace.SpanKindClient)
)

// contentLimit bounds the prompt and completion put on a span with
// TraceContent.
const contentLimit = 4 << 10

// startSpan starts the request's server span, continuing the trace of the
// client's traceparent, and returns the context carrying it (the caller
// serves the request in it: made there, that request copy stays off the
// heap) and the writer to answer through (one that notes what the answer
// says when the span is recorded).
func (h *Handler) startSpan(w http.ResponseWriter, r *http.Request, rec *Record) (http.ResponseWriter, context.Context) {
	ctx := w3c.Extract(r.Context(), canonicalCarrier(r.Header))
	ctx, span := h.cfg.Tracer.Start(ctx, operationName(rec.Endpoint), serverKind)
	rec.span = span
	if !span.IsRecording() {
		return w, ctx
	}
	tw := &traceWriter{ResponseWriter: w, keep: h.cfg.TraceContent, path: r.URL.Path,
		gemini: rec.Endpoint == routing.EndpointGemini, reasonKey: reasonKeyOf(rec.Endpoint, h.cfg.TraceContent)}
	rec.tw = tw
	return tw, ctx
}

// recording reports whether the request's span records attributes.
func (rec *Record) recording() bool { return rec.tw != nil }

// traceRequest notes what the client asked for, for endSpan.
func (h *Handler) traceRequest(rec *Record, body []byte, req *routing.Request) {
	if !rec.recording() {
		return
	}
	rec.tw.requestModel, rec.tw.maxTokens = req.Model, req.MaxTokens
	if h.cfg.TraceContent {
		rec.tw.prompt = truncateUTF8(body, contentLimit)
	}
}

// traceEvent adds an event (a retry, a skipped deployment, a fallback, a
// budget or rate-limit decision) to the request's span.
func (rec *Record) traceEvent(name string, attrs ...attribute.KeyValue) {
	if rec.recording() {
		rec.span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// endSpan sets what the finished request came to and ends its span.
// Only its first call does: a span ended again, or from two goroutines at
// once, is recorded once.
func (h *Handler) endSpan(rec *Record) {
	if atomic.SwapUint32(&rec.spanEnded, 1) == 1 {
		return
	}
	span := rec.span
	if !rec.recording() {
		span.End()
		return
	}
	op := operationName(rec.Endpoint)
	if rec.Model != "" {
		span.SetName(op + " " + rec.Model)
	}
	setAttrs(span, newServerRecord(rec, op))
	setStatus(span, rec.Status)
	span.End()
}

// tryTraced is try inside a client span of its own: one per attempt, so
// retries and fallbacks show as the request's children. Its attributes
// are set once, when it ends; it ends also when try panics (a broken
// stream aborts the handler), as a failed attempt.
func (h *Handler) tryTraced(w http.ResponseWriter, r *http.Request, rec *Record, rt *raftstore.Route, d *raftstore.Deployment, x *exchange) (f *failure) {
	if !rec.recording() {
		return h.try(w, r, rec, rt, d, x)
	}
	at := attemptInfo{op: operationName(rec.Endpoint), model: upstreamModel(d, x.req.Model), number: rec.Attempts + 1,
		cooling: h.coolingNow(d), fallback: rec.Model != "" && rt.Name != rec.Model}
	ctx, span := h.cfg.Tracer.Start(r.Context(), at.op+" "+at.model, clientKind)
	defer func() { endAttempt(span, rec, rt, d, &at, f) }()
	return h.try(w, r.WithContext(ctx), rec, rt, d, x)
}

// attemptInfo is what an attempt's span notes of it before it runs.
type attemptInfo struct {
	op, model         string
	number            int
	cooling, fallback bool
}

// endAttempt sets an attempt's attributes and status and ends its span: f
// is its failure, nil when it answered (or panicked: then rec says how).
func endAttempt(span trace.Span, rec *Record, rt *raftstore.Route, d *raftstore.Deployment, at *attemptInfo, f *failure) {
	setAttrs(span, newAttemptRecord(rec, rt, d, at, f))
	if f != nil {
		span.SetStatus(codes.Error, f.err.Message)
	} else {
		setStatus(span, rec.Status)
	}
	span.End()
}

// coolingNow reports whether d is in its cooldown (without claiming a
// probe, as healthTable.cooling would).
func (h *Handler) coolingNow(d *raftstore.Deployment) bool {
	return h.health.Peek(d).CoolingAt(time.Now().UnixNano())
}

// setStatus marks a span failed for a status the gateway or upstream
// caused (5xx); a client's error (4xx) is not the server's failure.
func setStatus(span trace.Span, status int) {
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// operationName is the GenAI operation of an endpoint.
func operationName(ep routing.Endpoint) string {
	switch ep {
	case routing.EndpointCompletions:
		return "text_completion"
	case routing.EndpointEmbeddings:
		return "embeddings"
	case routing.EndpointGemini:
		return "generate_content"
	}
	return "chat"
}

// providerName is a deployment's gen_ai.provider.name.
func providerName(d *raftstore.Deployment) string {
	switch d.Provider {
	case routing.ProviderGemini:
		if d.Options["vertex_project"] != "" {
			return "gcp.vertex_ai"
		}
		return "gcp.gemini"
	case routing.ProviderBedrock:
		return "aws.bedrock"
	case routing.ProviderAzureOpenAI:
		return "azure.ai.openai"
	}
	return d.Provider
}

// traceTransport puts the attempt's traceparent on upstream requests.
type traceTransport struct{ next http.RoundTripper }

func (t traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if trace.SpanContextFromContext(req.Context()).IsValid() {
		w3c.Inject(req.Context(), canonicalCarrier(req.Header))
	}
	return t.next.RoundTrip(req)
}

// canonicalCarrier sets the propagator's headers under their canonical
// names directly, sparing http.Header.Set's canonicalization of the
// lower-case names (an allocation each).
type canonicalCarrier http.Header

func (c canonicalCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return first(c["Traceparent"])
	case "tracestate":
		return first(c["Tracestate"])
	}
	return http.Header(c).Get(key)
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
func (c canonicalCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }
func (c canonicalCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c["Traceparent"] = []string{value}
	case "tracestate":
		c["Tracestate"] = []string{value}
	default:
		http.Header(c).Set(key, value)
	}
}

// traceWriter passes the answer through and notes on the way the model
// that answered, its finish reasons and (with content) its first bytes.
type traceWriter struct {
	http.ResponseWriter
	content []byte
	keep    bool // keep content
	// gemini: the answer is in Gemini's format (its model is its
	// modelVersion); reasonKey ends its finish reasons' member names.
	gemini    bool
	reasonKey []byte
	model     string
	finish    []string
	// What the request asked for (traceRequest).
	path, requestModel, prompt string
	maxTokens                  int64
	// The records the spans' attributes are written from (the first
	// attempt's here, others' apart): set when a span ends, read by the
	// exporter after.
	server      serverRecord
	attempt     attemptRecord
	attemptUsed bool
}

func (tw *traceWriter) Write(p []byte) (int, error) {
	tw.scan(p)
	return tw.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (tw *traceWriter) Flush() {
	if f, ok := tw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (tw *traceWriter) Unwrap() http.ResponseWriter { return tw.ResponseWriter }

var (
	modelKey = []byte(`"model":`)
	// reasonKey ends every wire format's finish reason member:
	// "finish_reason" (OpenAI), "stop_reason" (Anthropic),
	// "finishReason" (Gemini), "reason" (the Responses API's
	// incomplete_details). Its first byte is frequent in any text, which
	// makes bytes.Index fall back to comparing at every offset: the
	// formats that need less look for a rarer byte.
	reasonKey = []byte(`eason":`)
	// snakeReasonKey ends the OpenAI chat, completions and Anthropic
	// ones, camelReasonKey Gemini's.
	snakeReasonKey = []byte(`_reason":`)
	camelReasonKey = []byte(`Reason":`)
)

// reasonKeyOf is the finish reasons' key in answers to ep. With content
// kept, every format looks for them all, as the content may be noted.
func reasonKeyOf(ep routing.Endpoint, keep bool) []byte {
	switch {
	case keep || ep == routing.EndpointResponses:
		return reasonKey
	case ep == routing.EndpointGemini:
		return camelReasonKey
	}
	return snakeReasonKey
}

// maxFinishReasons bounds the distinct finish reasons noted.
const maxFinishReasons = 8

func (tw *traceWriter) scan(p []byte) {
	if tw.keep && len(tw.content) < contentLimit {
		tw.content = append(tw.content, p[:min(len(p), contentLimit-len(tw.content))]...)
	}
	if tw.model == "" {
		tw.model = tw.responseModel(p)
	}
	for rest := p; len(tw.finish) < maxFinishReasons; {
		v, n := jsonStringAfter(rest, tw.reasonKey)
		if n < 0 {
			break
		}
		rest = rest[n:]
		if v != "" && (tw.keep || finishReasons[v]) && !containsString(tw.finish, v) {
			tw.finish = append(tw.finish, v)
		}
	}
}

// Without content, the scan must not note what the model wrote: a tool
// call's arguments may be a JSON object (Anthropic's tool_use input,
// Gemini's functionCall args) with members named "model" or "...reason".
// So a finish reason is noted only from the formats' vocabulary, and the
// model only from before the answer's content, or from Gemini's
// modelVersion, the last member of its answers.
var (
	modelVersionKey = []byte(`"modelVersion":`)
	contentKeys     = [...][]byte{[]byte(`"content`), []byte(`"choices"`), []byte(`"candidates"`), []byte(`"output"`),
		[]byte(`"delta"`), []byte(`"input"`), []byte(`"parts"`)}
	finishReasons = map[string]bool{
		// OpenAI chat, completions and Responses (incomplete_details.reason)
		"stop": true, "length": true, "tool_calls": true, "content_filter": true, "function_call": true,
		"max_output_tokens": true,
		// Anthropic
		"end_turn": true, "max_tokens": true, "stop_sequence": true, "tool_use": true, "pause_turn": true,
		"refusal": true, "model_context_window_exceeded": true,
		// Gemini
		"FINISH_REASON_UNSPECIFIED": true, "STOP": true, "MAX_TOKENS": true, "SAFETY": true, "RECITATION": true,
		"LANGUAGE": true, "OTHER": true, "BLOCKLIST": true, "PROHIBITED_CONTENT": true, "SPII": true,
		"MALFORMED_FUNCTION_CALL": true, "IMAGE_SAFETY": true, "UNEXPECTED_TOOL_CALL": true, "TOO_MANY_TOOL_CALLS": true,
	}
)

// responseModel returns the model an answer names in p ("" if none):
// Gemini's modelVersion, the others' "model" before their content. The
// searches run forward (bytes.Index is vectorized, bytes.LastIndex is
// not) and the content keys are looked for only before the model.
func (tw *traceWriter) responseModel(p []byte) string {
	if tw.keep {
		v, _ := jsonStringAfter(p, modelKey)
		return v
	}
	if tw.gemini {
		if i := lastIndex(p, modelVersionKey); i >= 0 {
			v, _ := jsonStringAfter(p[i:], modelVersionKey)
			return v
		}
	}
	i := bytes.Index(p, modelKey)
	if i < 0 {
		return ""
	}
	for _, k := range contentKeys {
		if bytes.Contains(p[:i], k) {
			return "" // the answer's content began: this "model" may be the model's own writing
		}
	}
	v, _ := jsonStringAfter(p[i:], modelKey)
	return v
}

// lastIndex is bytes.LastIndex for a key that is rare in p.
func lastIndex(p, key []byte) int {
	last := -1
	for off := 0; ; {
		i := bytes.Index(p[off:], key)
		if i < 0 {
			return last
		}
		last = off + i
		off = last + len(key)
	}
}

// jsonStringAfter finds key in p and returns the JSON string that follows
// it ("" when null or not a plain string) and the offset past it; -1 when
// key is not in p.
func jsonStringAfter(p, key []byte) (string, int) {
	i := bytes.Index(p, key)
	if i < 0 {
		return "", -1
	}
	rest := bytes.TrimLeft(p[i+len(key):], " ")
	off := len(p) - len(rest)
	if len(rest) == 0 || rest[0] != '"' {
		return "", off
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 || end > 128 || bytes.IndexByte(rest[1:1+end], '\\') >= 0 {
		return "", off + 1
	}
	return string(rest[1 : 1+end]), off + end + 2
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// truncateUTF8 returns at most n bytes of b as valid UTF-8.
func truncateUTF8(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD") // a rune cut in two becomes U+FFFD
}
