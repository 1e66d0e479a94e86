package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// The request the span queue frames around its spans in place is, byte
// for byte, what proto.Marshal writes of the same request (which the
// upstream client sent), with and without a resource schema.
func TestFramedRequestIsWhatProtoMarshalWrites(t *testing.T) {
	res := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: &commonpb.AnyValue{
		Value: &commonpb.AnyValue_StringValue{StringValue: strings.Repeat("s", 200)}}}}}
	scope := &commonpb.InstrumentationScope{Name: ScopeName, Version: "1"}
	for _, schema := range []string{"", "https://opentelemetry.io/schemas/1.26.0"} {
		for _, n := range []int{1, 100, 20000} { // one-, two- and three-byte lengths
			spans := protowire.AppendTag(nil, scopeSpansSpans, protowire.BytesType)
			spans = protowire.AppendBytes(spans, bytes.Repeat([]byte{0x2a, 1, 'x'}, n))
			q := &spanQueue{framing: newFraming(res, schema, scope)}
			b := append(make([]byte, q.head), spans...)
			got := q.frame(&b)
			ss := &tracepb.ScopeSpans{Scope: scope}
			ss.ProtoReflect().SetUnknown(protoreflect.RawFields(spans))
			want, err := proto.Marshal(&coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
				{Resource: res, SchemaUrl: schema, ScopeSpans: []*tracepb.ScopeSpans{ss}}}})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("schema %q, %d B of spans: framed request differs from proto.Marshal's (%d B against %d B)", schema, len(spans), len(got), len(want))
			}
		}
	}
}

// The OTLP/HTTP variables mean what they mean to the upstream client:
// the general endpoint gets /v1/traces, the signal's is taken as is; a
// signal's variable wins over the general one; http means no TLS unless
// _INSECURE says otherwise; headers are URL-escaped; the timeout is in
// milliseconds; bad values are left out and reported.
func TestHTTPExporterSettingsFollowTheOTLPVariables(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    httpConfig
		wantErr bool
	}{
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/base"},
			want: httpConfig{url: "http://collector:4318/base/v1/traces", timeout: 10 * time.Second, header: http.Header{}}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c:443",
			"OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "Authorization=Basic%20eDp5, x-tenant = t1 ",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"},
			want: httpConfig{url: "https://c:443/", gzip: true, timeout: 2500 * time.Millisecond,
				header: http.Header{"Authorization": {"Basic eDp5"}, "X-Tenant": {"t1"}}}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318", "OTEL_EXPORTER_OTLP_INSECURE": "true",
			"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"},
			want: httpConfig{url: "http://c:4318/v1/traces", timeout: 10 * time.Second, header: http.Header{}}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon",
			"OTEL_EXPORTER_OTLP_HEADERS": "good=1,bad key=2,novalue", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent.pem"},
			want:    httpConfig{url: "http://c:4318/v1/traces", timeout: 10 * time.Second, header: http.Header{"Good": {"1"}}},
			wantErr: true},
	} {
		got, err := httpConfigFrom(mapEnv(tc.env), func(string) ([]byte, error) { return nil, errors.New("no file") })
		if (err != nil) != tc.wantErr {
			t.Errorf("%v: error %v, want one: %v", tc.env, err, tc.wantErr)
		}
		if got.url != tc.want.url || got.gzip != tc.want.gzip || got.timeout != tc.want.timeout ||
			!equalHeaders(got.header, tc.want.header) || got.tls != nil {
			t.Errorf("%v:\n got %+v\nwant %+v", tc.env, got, tc.want)
		}
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a.Get(k) != b.Get(k) {
			return false
		}
	}
	return true
}

// capture is an OTLP/HTTP receiver that answers with the statuses it is
// given in turn (then 200) and keeps what it received.
type capture struct {
	mu       sync.Mutex
	statuses []int
	headers  []http.Header
	bodies   [][]byte
}

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err == nil {
			b, err = io.ReadAll(zr)
		}
		if err != nil {
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.headers, c.bodies = append(c.headers, r.Header.Clone()), append(c.bodies, b)
	if len(c.statuses) > 0 {
		code := c.statuses[0]
		c.statuses = c.statuses[1:]
		w.Header().Set("Retry-After", "0")
		http.Error(w, "busy", code)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// A batch reaches the receiver with the configured headers, the OTLP
// content type and the exporter's user agent, compressed when asked; a
// 503 or 429 is retried (Retry-After honoured), a 400 is not, and its
// error names neither header values nor the body sent.
func TestHTTPExporterSendsHeadersCompressesAndRetriesAsUpstream(t *testing.T) {
	rcv := &capture{statuses: []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	cfg, err := httpConfigFrom(mapEnv(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL + "/v1/traces",
		"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20secret-token", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newHTTPExporter(cfg)
	e.retry = retryPolicy{initial: time.Millisecond, maxWait: time.Millisecond, maxElapsed: time.Minute}
	body := []byte("\x0a\x00 the request")
	if err := e.post(context.Background(), body); err != nil {
		t.Fatalf("post after a 503 and a 429: %v", err)
	}
	if len(rcv.bodies) != 3 {
		t.Fatalf("%d requests, want 3 (two retried)", len(rcv.bodies))
	}
	for i, h := range rcv.headers {
		if !bytes.Equal(rcv.bodies[i], body) {
			t.Errorf("request %d: body %q, want %q", i, rcv.bodies[i], body)
		}
		if h.Get("Authorization") != "Bearer secret-token" || h.Get("Content-Type") != "application/x-protobuf" ||
			!strings.HasPrefix(h.Get("User-Agent"), "OTel OTLP Exporter Go/") || h.Get("Content-Encoding") != "gzip" {
			t.Errorf("request %d: headers %v", i, h)
		}
	}
	rcv.statuses = []int{http.StatusBadRequest}
	err = e.post(context.Background(), body)
	if err == nil || len(rcv.bodies) != 4 {
		t.Fatalf("after a 400: error %v, %d requests; want an error and no retry", err, len(rcv.bodies))
	}
	if strings.Contains(err.Error(), "secret-token") || strings.Contains(err.Error(), "the request") {
		t.Errorf("error %q shows a header value or the body sent", err)
	}
}

// Retries stop at the export's deadline.
func TestHTTPExporterRetriesEndWithTheExportsDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	cfg, _ := httpConfigFrom(mapEnv(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}), nil)
	e := newHTTPExporter(cfg) // the default policy's first wait is 2.5-7.5 s
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.post(ctx, []byte{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the deadline's", err)
	}
}
