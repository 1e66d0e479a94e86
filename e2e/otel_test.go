package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/telemetry/otlptest"
)

// TestOpenTelemetryExport runs a node that exports traces, request logs
// and the GenAI metrics to an in-process OTLP receiver, once with traces
// over gRPC and logs and metrics over HTTP and once the other way round. A streamed request whose route's only
// deployment fails (three attempts) and whose fallback serves must show as
// one server span continuing the client's trace with four client spans
// under it; the mock upstream must have seen the serving attempt's
// traceparent; and every request in the ledger must have exactly one log
// record (and one access-log line) with its fields; and the four GenAI
// histograms must count the two requests with their attributes.
func TestOpenTelemetryExport(t *testing.T) {
	for _, c := range []struct{ traces, logs string }{{"grpc", "http/protobuf"}, {"http/protobuf", "grpc"}} {
		t.Run("traces-"+strings.ReplaceAll(c.traces, "/", "-"), func(t *testing.T) {
			rv := otlptest.Start(t)
			endpoint := func(proto, path string) string {
				if proto == "grpc" {
					return "http://" + rv.GRPCAddr
				}
				return "http://" + rv.HTTPAddr + path
			}
			for k, v := range map[string]string{
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":  endpoint(c.traces, "/v1/traces"),
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":  c.traces,
				"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT":    endpoint(c.logs, "/v1/logs"),
				"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL":    c.logs,
				"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": endpoint(c.logs, "/v1/metrics"),
				"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": c.logs,
				"OTEL_METRIC_EXPORT_INTERVAL":         "100",
				"OTEL_SERVICE_NAME":                   "tollgate-e2e",
				"OTEL_BSP_SCHEDULE_DELAY":             "100",
				"OTEL_BLRP_SCHEDULE_DELAY":            "100",
			} {
				t.Setenv(k, v) // the node inherits the environment
			}
			checkOTelExport(t, rv)
		})
	}
}

func checkOTelExport(t *testing.T, rv *otlptest.Receiver) {
	up := mockLLM(t)
	accessLog := filepath.Join(t.TempDir(), "access.jsonl")
	g := startGateway(t, t.TempDir(), "otel-admin-token", "--retry-backoff", "5ms", "--access-log", accessLog)
	g.ctl(t, "model", "add", "otel-backup", "--deployment", "backup", "--provider", "openai-compatible", "--base-url", up, "--upstream-model", "mock-model")
	g.ctl(t, "model", "add", "otel-main", "--deployment", "primary", "--provider", "openai-compatible", "--base-url", up, "--upstream-model", "m?status=500")
	g.ctl(t, "model", "route", "otel-main", "--fallback", "otel-backup")
	keyID, secret := g.createKey(t, "--name", "otel")

	const clientTrace, clientSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	streamID := sendTraced(t, g, secret, `{"model":"otel-main","stream":true,"messages":[{"role":"user","content":"hello"}]}`,
		"00-"+clientTrace+"-"+clientSpan+"-01")
	seen := upstreamStats(t, up).LastTraceparent
	plainID := sendTraced(t, g, secret, `{"model":"otel-backup","messages":[{"role":"user","content":"again"}]}`, "")

	var server *tracepb.Span
	var clients []*tracepb.Span
	waitFor(t, 20*time.Second, "the stream's spans", func() bool {
		server, clients = spanTree(rv.Spans(), clientTrace)
		return server != nil && len(clients) == 4
	})
	if otlptest.Hex(server.GetParentSpanId()) != clientSpan {
		t.Errorf("server span's parent %s, want the client's span %s", otlptest.Hex(server.GetParentSpanId()), clientSpan)
	}
	sa := otlptest.Attrs(server.GetAttributes())
	for k, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "otel-main", "gen_ai.response.model": "mock-model",
		"gen_ai.provider.name": "openai-compatible", "gen_ai.response.finish_reasons": "stop",
		"tollgate.key_id": keyID, "tollgate.deployment": "otel-backup/backup", "tollgate.attempts": "4",
		"tollgate.request_id": streamID, "http.response.status_code": "200",
	} {
		if sa[k] != want {
			t.Errorf("server span %s = %q, want %q", k, sa[k], want)
		}
	}
	for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.server.time_to_first_token"} {
		if v, err := strconv.ParseFloat(sa[k], 64); err != nil || v <= 0 {
			t.Errorf("server span %s = %q, want a positive number", k, sa[k])
		}
	}
	if _, content := sa["gen_ai.prompt"]; content {
		t.Error("prompt content on a span without --trace-content")
	}
	var events []string
	for _, e := range server.GetEvents() {
		events = append(events, e.GetName())
	}
	if got := strings.Join(events, ","); got != "tollgate.retry,tollgate.retry,tollgate.fallback" {
		t.Errorf("server span events %q, want two retries then the fallback", got)
	}
	for i, c := range clients {
		ca := otlptest.Attrs(c.GetAttributes())
		wantDep, wantErr := "primary", true
		if i == 3 {
			wantDep, wantErr = "backup", false
		}
		failed := c.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR
		if ca["tollgate.deployment"] != wantDep || failed != wantErr || ca["tollgate.attempt"] != strconv.Itoa(i+1) ||
			c.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || otlptest.Hex(c.GetParentSpanId()) != otlptest.Hex(server.GetSpanId()) {
			t.Errorf("client span %d: kind %v, status %v, attributes %v", i, c.GetKind(), c.GetStatus(), ca)
		}
	}
	if ca := otlptest.Attrs(clients[3].GetAttributes()); ca["tollgate.fallback"] != "true" || ca["gen_ai.usage.output_tokens"] == "" {
		t.Errorf("the serving attempt: %v", ca)
	}
	if want := "00-" + clientTrace + "-" + otlptest.Hex(clients[3].GetSpanId()) + "-01"; seen != want {
		t.Errorf("the upstream saw traceparent %q, want %q (the serving attempt's span)", seen, want)
	}
	if !rv.HasService("tollgate-e2e") {
		t.Error("OTEL_SERVICE_NAME was not the exported service.name")
	}

	ledger := g.spendLogs(t)
	if len(ledger) != 2 {
		t.Fatalf("%d ledger records, want 2", len(ledger))
	}
	waitFor(t, 20*time.Second, "a log record per request", func() bool { return len(rv.Logs()) >= 2 })
	logs := map[string][]map[string]string{}
	for _, l := range rv.Logs() {
		a := otlptest.Attrs(l.GetAttributes())
		a["trace_id"] = otlptest.Hex(l.GetTraceId())
		logs[a["request_id"]] = append(logs[a["request_id"]], a)
	}
	access := readAccessLog(t, accessLog)
	for _, r := range ledger {
		got := logs[r.RequestID]
		if len(got) != 1 {
			t.Errorf("request %s has %d log records, want 1", r.RequestID, len(got))
			continue
		}
		want := map[string]string{"key_id": r.KeyID, "team_id": r.TeamID, "model": r.Model, "node": r.Node,
			"status": strconv.Itoa(r.Status), "endpoint": r.Endpoint, "stream": strconv.FormatBool(r.Stream),
			"prompt_tokens": strconv.FormatInt(int64(r.PromptTokens), 10), "completion_tokens": strconv.FormatInt(int64(r.CompletionTokens), 10),
			"cost_nanos": strconv.FormatInt(int64(r.CostNanos), 10), "unpriced": strconv.FormatBool(r.Unpriced)}
		for k, v := range want {
			if got[0][k] != v {
				t.Errorf("request %s: log record %s = %q, ledger %q", r.RequestID, k, got[0][k], v)
			}
			if a := access[r.RequestID]; a[k] != v {
				t.Errorf("request %s: access log %s = %q, ledger %q", r.RequestID, k, a[k], v)
			}
		}
	}
	if logs[streamID][0]["trace_id"] != clientTrace {
		t.Errorf("the stream's log record is in trace %q, want the client's", logs[streamID][0]["trace_id"])
	}
	if len(logs[plainID]) != 1 || len(access) != 2 {
		t.Errorf("the second request: %d log records; access log has %d requests", len(logs[plainID]), len(access))
	}
	if b, _ := os.ReadFile(accessLog); strings.Contains(string(b), secret) {
		t.Error("the access log holds the key's secret")
	}
	checkGenAIMetrics(t, rv, ledger)
}

// checkGenAIMetrics checks the GenAI histograms over OTLP against the
// ledger's two requests: the stream on otel-main that otel-backup's
// deployment served, and the plain one on otel-backup.
func checkGenAIMetrics(t *testing.T, rv *otlptest.Receiver, ledger []spendRecord) {
	t.Helper()
	var last map[string]*metricspb.Metric
	waitFor(t, 20*time.Second, "the GenAI metrics of both requests", func() bool {
		last = rv.LastMetrics()
		return histCount(last["gen_ai.server.request.duration"], nil) == 2
	})
	var stream, plain spendRecord
	for _, r := range ledger {
		if r.Stream {
			stream = r
		} else {
			plain = r
		}
	}
	base := func(model string) map[string]string {
		dep := "backup"
		if model == "otel-main" {
			dep = "otel-backup/backup" // the fallback route's deployment
		}
		return map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
			"tollgate.deployment": dep, "gen_ai.provider.name": "openai-compatible"}
	}
	with := func(m map[string]string, k, v string) map[string]string { m[k] = v; return m }
	type want struct {
		metric, unit string
		attrs        map[string]string
		count        uint64
		sum          float64 // -1: any positive sum
	}
	wants := []want{
		{"gen_ai.server.request.duration", "s", base("otel-main"), 1, -1},
		{"gen_ai.server.request.duration", "s", base("otel-backup"), 1, -1},
		{"gen_ai.client.token.usage", "{token}", with(base("otel-main"), "gen_ai.token.type", "input"), 1, float64(stream.PromptTokens)},
		{"gen_ai.client.token.usage", "{token}", with(base("otel-main"), "gen_ai.token.type", "output"), 1, float64(stream.CompletionTokens)},
		{"gen_ai.client.token.usage", "{token}", with(base("otel-backup"), "gen_ai.token.type", "input"), 1, float64(plain.PromptTokens)},
		{"gen_ai.client.token.usage", "{token}", with(base("otel-backup"), "gen_ai.token.type", "output"), 1, float64(plain.CompletionTokens)},
		{"gen_ai.server.time_to_first_token", "s", base("otel-main"), 1, -1},
		{"gen_ai.server.time_per_output_token", "s", base("otel-main"), 1, -1},
	}
	for _, w := range wants {
		m := last[w.metric]
		if m == nil {
			t.Errorf("no %s exported (got %d metrics)", w.metric, len(last))
			continue
		}
		if m.GetUnit() != w.unit {
			t.Errorf("%s unit %q, want %q", w.metric, m.GetUnit(), w.unit)
		}
		p := histPoint(m, w.attrs)
		switch {
		case p == nil:
			var got []map[string]string
			for _, p := range m.GetHistogram().GetDataPoints() {
				got = append(got, otlptest.Attrs(p.GetAttributes()))
			}
			t.Errorf("%s: no data point with attributes %v (got %v)", w.metric, w.attrs, got)
		case p.GetCount() != w.count || (w.sum < 0 && p.GetSum() <= 0) || (w.sum >= 0 && p.GetSum() != w.sum):
			t.Errorf("%s %v: count %d sum %v, want %d and %v", w.metric, w.attrs, p.GetCount(), p.GetSum(), w.count, w.sum)
		}
	}
	if n := histCount(last["gen_ai.server.time_to_first_token"], nil); n != 1 {
		t.Errorf("time to first token counts %d requests, want the one stream", n)
	}
}

// histPoint returns the data point of histogram m whose attributes are
// exactly attrs.
func histPoint(m *metricspb.Metric, attrs map[string]string) *metricspb.HistogramDataPoint {
	for _, p := range m.GetHistogram().GetDataPoints() {
		if maps.Equal(otlptest.Attrs(p.GetAttributes()), attrs) {
			return p
		}
	}
	return nil
}

// histCount is the count of m's data points (all of them when attrs is
// nil).
func histCount(m *metricspb.Metric, attrs map[string]string) uint64 {
	var n uint64
	for _, p := range m.GetHistogram().GetDataPoints() {
		if attrs == nil || maps.Equal(otlptest.Attrs(p.GetAttributes()), attrs) {
			n += p.GetCount()
		}
	}
	return n
}

// sendTraced posts body with traceparent (when set), reads the whole
// answer and returns its request id.
func sendTraced(t *testing.T, g *gateway, secret, body, traceparent string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.http+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %s", resp.Status, b)
	}
	return resp.Header.Get("X-Request-Id")
}

// spanTree returns the server span of trace traceHex and its client
// spans in start order.
func spanTree(spans []*tracepb.Span, traceHex string) (*tracepb.Span, []*tracepb.Span) {
	var server *tracepb.Span
	for _, s := range spans {
		if otlptest.Hex(s.GetTraceId()) == traceHex && s.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
			server = s
		}
	}
	if server == nil {
		return nil, nil
	}
	var clients []*tracepb.Span
	for _, s := range spans {
		if string(s.GetParentSpanId()) == string(server.GetSpanId()) {
			clients = append(clients, s)
		}
	}
	for i := 1; i < len(clients); i++ { // by start time
		for j := i; j > 0 && clients[j].GetStartTimeUnixNano() < clients[j-1].GetStartTimeUnixNano(); j-- {
			clients[j], clients[j-1] = clients[j-1], clients[j]
		}
	}
	return server, clients
}

func upstreamStats(t *testing.T, base string) mock.Stats {
	t.Helper()
	resp, err := client.Get(strings.TrimSuffix(base, "/v1") + "/mock/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st mock.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// readAccessLog reads the JSON lines of an access log by request id, every
// value formatted as a string.
func readAccessLog(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("access log line %q: %v", sc.Text(), err)
		}
		m := map[string]string{}
		for k, v := range line {
			switch x := v.(type) {
			case string:
				m[k] = x
			case float64:
				m[k] = strconv.FormatFloat(x, 'f', -1, 64)
			case bool:
				m[k] = strconv.FormatBool(x)
			}
		}
		out[m["request_id"]] = m
	}
	return out
}
