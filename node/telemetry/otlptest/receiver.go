// Package otlptest is an in-process OTLP receiver for tests: it takes
// traces, logs and metrics over gRPC and over HTTP/protobuf on loopback
// listeners and keeps what it received.
package otlptest

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Receiver collects exported spans and log records.
type Receiver struct {
	// GRPCAddr and HTTPAddr are the listeners' host:port.
	GRPCAddr, HTTPAddr string

	mu    sync.Mutex
	spans []*tracepb.Span
	rss   []*tracepb.ResourceSpans
	logs  []*logspb.LogRecord
	// metrics are the exports' metrics, each export's in its own slice.
	metrics [][]*metricspb.Metric
	// Resources are the resource attributes of every export, by service.
	services map[string]bool
	posts    map[string]int // exports by transport ("grpc", "http")
	discard  bool
}

// Discard makes the receiver count exports but keep no span nor log
// record (for benchmarks).
func (rv *Receiver) Discard() {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.discard = true
}

// Start starts a receiver; the test's cleanup stops it.
func Start(t testing.TB) *Receiver {
	t.Helper()
	rv := &Receiver{services: map[string]bool{}, posts: map[string]int{}}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rv.GRPCAddr, rv.HTTPAddr = gl.Addr().String(), hl.Addr().String()
	gs := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(gs, traceService{rv: rv})
	collogs.RegisterLogsServiceServer(gs, logsService{rv: rv})
	colmetrics.RegisterMetricsServiceServer(gs, metricsService{rv: rv})
	go func() { _ = gs.Serve(gl) }()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		var req coltrace.ExportTraceServiceRequest
		if !readProto(w, r, &req) {
			return
		}
		rv.addSpans("http", req.GetResourceSpans())
		writeProto(w, &coltrace.ExportTraceServiceResponse{})
	})
	mux.HandleFunc("POST /v1/logs", func(w http.ResponseWriter, r *http.Request) {
		var req collogs.ExportLogsServiceRequest
		if !readProto(w, r, &req) {
			return
		}
		rv.addLogs("http", req.GetResourceLogs())
		writeProto(w, &collogs.ExportLogsServiceResponse{})
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, r *http.Request) {
		var req colmetrics.ExportMetricsServiceRequest
		if !readProto(w, r, &req) {
			return
		}
		rv.addMetrics("http", req.GetResourceMetrics())
		writeProto(w, &colmetrics.ExportMetricsServiceResponse{})
	})
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(hl) }()
	t.Cleanup(func() {
		gs.Stop()
		_ = hs.Close()
	})
	return rv
}

func readProto(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err == nil {
		err = proto.Unmarshal(b, m)
	}
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want an OTLP protobuf body", http.StatusBadRequest)
		return false
	}
	return true
}

func writeProto(w http.ResponseWriter, m proto.Message) {
	b, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

type traceService struct {
	coltrace.UnimplementedTraceServiceServer
	rv *Receiver
}

func (s traceService) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	s.rv.addSpans("grpc", req.GetResourceSpans())
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type logsService struct {
	collogs.UnimplementedLogsServiceServer
	rv *Receiver
}

func (s logsService) Export(_ context.Context, req *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	s.rv.addLogs("grpc", req.GetResourceLogs())
	return &collogs.ExportLogsServiceResponse{}, nil
}

type metricsService struct {
	colmetrics.UnimplementedMetricsServiceServer
	rv *Receiver
}

func (s metricsService) Export(_ context.Context, req *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	s.rv.addMetrics("grpc", req.GetResourceMetrics())
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

func (rv *Receiver) addMetrics(via string, rms []*metricspb.ResourceMetrics) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.posts[via+" metrics"]++
	if rv.discard {
		return
	}
	var ms []*metricspb.Metric
	for _, rm := range rms {
		rv.noteService(rm.GetResource().GetAttributes())
		for _, sm := range rm.GetScopeMetrics() {
			ms = append(ms, sm.GetMetrics()...)
		}
	}
	rv.metrics = append(rv.metrics, ms)
}

// LastMetrics returns the metrics of the last export that had any, by
// name (cumulative metrics: the totals so far).
func (rv *Receiver) LastMetrics() map[string]*metricspb.Metric {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	out := map[string]*metricspb.Metric{}
	for i := len(rv.metrics) - 1; i >= 0 && len(out) == 0; i-- {
		for _, m := range rv.metrics[i] {
			out[m.GetName()] = m
		}
	}
	return out
}

func (rv *Receiver) addSpans(via string, rss []*tracepb.ResourceSpans) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.posts[via+" traces"]++
	if rv.discard {
		return
	}
	rv.rss = append(rv.rss, rss...)
	for _, rs := range rss {
		rv.noteService(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			rv.spans = append(rv.spans, ss.GetSpans()...)
		}
	}
}

func (rv *Receiver) addLogs(via string, rls []*logspb.ResourceLogs) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.posts[via+" logs"]++
	if rv.discard {
		return
	}
	for _, rl := range rls {
		rv.noteService(rl.GetResource().GetAttributes())
		for _, sl := range rl.GetScopeLogs() {
			rv.logs = append(rv.logs, sl.GetLogRecords()...)
		}
	}
}

func (rv *Receiver) noteService(attrs []*commonKV) {
	for _, kv := range attrs {
		if kv.GetKey() == "service.name" {
			rv.services[kv.GetValue().GetStringValue()] = true
		}
	}
}

// Spans returns the spans received so far.
func (rv *Receiver) Spans() []*tracepb.Span {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]*tracepb.Span(nil), rv.spans...)
}

// ResourceSpans returns the exports' spans as they were grouped, by
// resource and scope.
func (rv *Receiver) ResourceSpans() []*tracepb.ResourceSpans {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]*tracepb.ResourceSpans(nil), rv.rss...)
}

// Logs returns the log records received so far.
func (rv *Receiver) Logs() []*logspb.LogRecord {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]*logspb.LogRecord(nil), rv.logs...)
}

// Exports returns how many exports arrived, by "grpc traces", "http
// logs" and so on.
func (rv *Receiver) Exports() map[string]int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	out := make(map[string]int, len(rv.posts))
	for k, v := range rv.posts {
		out[k] = v
	}
	return out
}

// HasService reports whether an export named service.name s.
func (rv *Receiver) HasService(s string) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.services[s]
}
