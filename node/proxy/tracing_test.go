package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

// tracer returns a tracer that samples every span and the exporter its
// ended spans go to at once.
func tracer(t *testing.T) (trace.Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("test"), exp
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func eventNames(s tracetest.SpanStub) []string {
	var out []string
	for _, e := range s.Events {
		out = append(out, e.Name)
	}
	return out
}

// A streamed request whose route's only deployment fails twice and whose
// fallback route serves: one server span continuing the client's trace,
// three client spans under it (two failed attempts, then the fallback's),
// the retry and the fallback as events, the GenAI attributes, and the
// upstream request carrying the serving attempt's traceparent.
func TestTracingShowsRetriesAndFallbackOfAStream(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{Chunks: 4})
	keyID, secret := newKey(t)
	tr, exp := tracer(t)
	g := startGateway(t, proxy.Config{MaxAttempts: 2, RetryBackoff: time.Millisecond, Tracer: tr, TraceContent: true})
	backupDep := uniq("dep")
	backup := newRoute(t, "backup", dep(backupDep, url, "ok-model"))
	primaryDep := uniq("dep")
	primary := newRoute(t, "primary", dep(primaryDep, url, "m?status=503"))
	setRouteOptions(t, primary, &pb.RouteOptions{Fallbacks: []string{backup}})

	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := g.do(t, "POST", "/v1/chat/completions", secret, chatBody(primary, `"stream":true`),
		"Traceparent", "00-"+clientTrace+"-"+clientSpan+"-01")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	g.rec.of(t, r)
	waitFor(t, "the server span", func() bool {
		for _, s := range exp.GetSpans() {
			if s.SpanKind == trace.SpanKindServer {
				return true
			}
		}
		return false
	})
	var server tracetest.SpanStub
	var clients []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.SpanKind {
		case trace.SpanKindServer:
			server = s
		case trace.SpanKindClient:
			clients = append(clients, s)
		}
	}
	if got := server.SpanContext.TraceID().String(); got != clientTrace || server.Parent.SpanID().String() != clientSpan {
		t.Fatalf("server span in trace %s under %s: the client's traceparent was not continued", got, server.Parent.SpanID())
	}
	if server.Name != "chat "+primary {
		t.Errorf("server span named %q", server.Name)
	}
	sa := attrMap(server.Attributes)
	for k, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": primary, "gen_ai.response.model": "ok-model",
		"gen_ai.provider.name": "openai-compatible", "gen_ai.response.finish_reasons": `["stop"]`,
		"tollgate.key_id": keyID, "tollgate.deployment": backup + "/" + backupDep, "tollgate.attempts": "3",
		"http.response.status_code": "200", "tollgate.stream": "true",
	} {
		if sa[k] != want {
			t.Errorf("server span %s = %q, want %q", k, sa[k], want)
		}
	}
	for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.server.time_to_first_token"} {
		if sa[k] == "" || sa[k] == "0" {
			t.Errorf("server span has no %s (%q)", k, sa[k])
		}
	}
	if !strings.Contains(sa["gen_ai.prompt"], "Hello there, gateway!") || !strings.Contains(sa["gen_ai.completion"], "data: ") {
		t.Errorf("trace content: prompt %q completion %q", sa["gen_ai.prompt"], sa["gen_ai.completion"])
	}
	for k, v := range sa {
		if strings.Contains(v, secret) {
			t.Errorf("span attribute %s holds the key's secret", k)
		}
	}
	if ev := strings.Join(eventNames(server), ","); ev != "tollgate.retry,tollgate.fallback" {
		t.Errorf("server span events %q, want a retry then a fallback", ev)
	}

	if len(clients) != 3 {
		t.Fatalf("%d client spans, want 3 (two attempts on the primary, one on the fallback)", len(clients))
	}
	for i, c := range clients {
		ca := attrMap(c.Attributes)
		if c.Parent.SpanID() != server.SpanContext.SpanID() || c.SpanContext.TraceID() != server.SpanContext.TraceID() {
			t.Errorf("client span %d is not a child of the server span", i)
		}
		wantDep, wantStatus := primaryDep, codes.Error
		if i == 2 {
			wantDep, wantStatus = backupDep, codes.Unset
		}
		if ca["tollgate.deployment"] != wantDep || c.Status.Code != wantStatus || ca["tollgate.attempt"] != string(rune('1'+i)) {
			t.Errorf("client span %d: deployment %s status %v attrs %v", i, ca["tollgate.deployment"], c.Status, ca)
		}
	}
	if ca := attrMap(clients[0].Attributes); ca["error.type"] == "" || ca["tollgate.cools"] != "true" {
		t.Errorf("failed attempt: %v", ca)
	}
	if ca := attrMap(clients[2].Attributes); ca["tollgate.fallback"] != "true" || ca["gen_ai.usage.output_tokens"] == "" || ca["gen_ai.request.model"] != "ok-model" {
		t.Errorf("serving attempt: %v", ca)
	}
	want := "00-" + clientTrace + "-" + clients[2].SpanContext.SpanID().String() + "-01"
	if got := ms.Stats().LastTraceparent; got != want {
		t.Errorf("upstream saw traceparent %q, want %q (the serving attempt's span)", got, want)
	}
}

// Without a tracer nothing is traced and upstreams get no traceparent; a
// client's own traceparent is not passed on either.
func TestNoTracerSendsNoTraceparent(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	route := newRoute(t, "plain", dep(uniq("dep"), url, "m"))
	r := g.do(t, "POST", "/v1/chat/completions", secret, chatBody(route),
		"Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if got := ms.Stats().LastTraceparent; got != "" {
		t.Fatalf("upstream saw traceparent %q with tracing off", got)
	}
}

// An unsampled trace is continued, not recorded: the upstream gets the
// client's trace with the sampled flag off, and no span is exported.
func TestUnsampledTraceIsPropagatedNotRecorded(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	g := startGateway(t, proxy.Config{Tracer: tp.Tracer("test")})
	route := newRoute(t, "unsampled", dep(uniq("dep"), url, "m"))
	r := g.do(t, "POST", "/v1/chat/completions", secret, chatBody(route),
		"Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	g.rec.of(t, r)
	if got := ms.Stats().LastTraceparent; !strings.HasPrefix(got, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || !strings.HasSuffix(got, "-00") {
		t.Errorf("upstream saw traceparent %q", got)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported of an unsampled trace", n)
	}
}

// Without TraceContent no span carries what the model wrote: a tool
// call's arguments that are a JSON object (Anthropic's tool_use input,
// Gemini's functionCall args) have members named like the ones the span
// notes ("model", "modelVersion", a "...reason"), and their values are
// content.
func TestTracingWithoutContentKeepsToolArgumentsOut(t *testing.T) {
	t.Parallel()
	const answer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-mock","content":[` +
		`{"type":"tool_use","id":"toolu_1","name":"lookup","input":{"reason":"SECRET-REASON","model":"SECRET-MODEL","modelVersion":"SECRET-VERSION"}}],` +
		`"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":3}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(up.Close)
	d := &pb.Deployment{Id: uniq("anthropic"), Provider: routing.ProviderAnthropic, BaseUrl: up.URL + "/v1", UpstreamModel: "claude-mock"}
	route := newRoute(t, "tracetools", d)
	_, secret := newKey(t)
	tr, exp := tracer(t)
	g := startGateway(t, proxy.Config{Tracer: tr})
	for _, c := range []struct{ path, body string }{
		{"/v1/messages", `{"model":"` + route + `","max_tokens":64,"messages":[{"role":"user","content":"Hi"}]}`},
		{"/v1beta/models/" + route + ":generateContent", `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`},
	} {
		r := g.do(t, http.MethodPost, c.path, "", c.body, "X-Api-Key", secret)
		if r.status != 200 || !strings.Contains(string(r.body), "SECRET-REASON") {
			t.Fatalf("%s: status %d: %s", c.path, r.status, r.body)
		}
		g.rec.of(t, r)
	}
	waitFor(t, "two server spans", func() bool {
		n := 0
		for _, s := range exp.GetSpans() {
			if s.SpanKind == trace.SpanKindServer {
				n++
			}
		}
		return n == 2
	})
	for _, s := range exp.GetSpans() {
		if a := attrMap(s.Attributes); s.SpanKind == trace.SpanKindServer &&
			(a["gen_ai.response.model"] == "" || !strings.Contains(a["gen_ai.response.finish_reasons"], "tool_use") &&
				!strings.Contains(a["gen_ai.response.finish_reasons"], "STOP")) {
			t.Errorf("span %q: response model %q, finish reasons %s; want the answer's", s.Name,
				a["gen_ai.response.model"], a["gen_ai.response.finish_reasons"])
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "SECRET") {
				t.Errorf("span %q: attribute %s = %s: content without TraceContent", s.Name, kv.Key, kv.Value.String())
			}
		}
	}
}

// A stream that breaks mid-way aborts the handler (a panic): its attempt's
// client span must still end, failed, with the 502 the request got.
func TestTracingEndsTheAttemptOfABrokenStream(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	tr, exp := tracer(t)
	g := startGateway(t, proxy.Config{Tracer: tr})
	route := newRoute(t, "midreset-traced", dep(uniq("dep"), url, "m?chunks=10&fault=reset-mid-stream"))
	resp, sse := g.openStream(t, context.Background(), "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	_, _ = sse.all() // cut short
	var client, server sdktrace.ReadOnlySpan
	waitFor(t, "the request's two spans", func() bool {
		for _, s := range exp.GetSpans().Snapshots() {
			switch s.SpanKind() {
			case trace.SpanKindClient:
				client = s
			case trace.SpanKindServer:
				server = s
			}
		}
		return client != nil && server != nil
	})
	ca := attrMap(client.Attributes())
	if client.Status().Code != codes.Error || ca["http.response.status_code"] != "502" || ca["tollgate.attempt"] != "1" {
		t.Errorf("the broken attempt's span: status %v, attributes %v", client.Status(), ca)
	}
	if client.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Error("the attempt's span is not the request's child")
	}
}
