// Package telemetry sets up OpenTelemetry for a node: traces and request
// logs exported over OTLP (gRPC or HTTP/protobuf), configured only by the
// standard OTEL_* environment variables. With no OTLP endpoint set it is
// off: Tracer and Logger return nil, and the data plane then does no
// tracing work at all.
//
// Variables read (the exporters and the SDK read the rest of theirs):
//
//	OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
//	OTEL_EXPORTER_OTLP_LOGS_ENDPOINT     where to export; none: off
//	OTEL_EXPORTER_OTLP_PROTOCOL (and _TRACES_/_LOGS_PROTOCOL)
//	                                     grpc or http/protobuf (default)
//	OTEL_EXPORTER_OTLP_HEADERS (and _TRACES_/_LOGS_HEADERS)
//	OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
//	OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG
//	OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none, OTEL_LOGS_EXPORTER=none
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of Tollgate's spans and logs.
const ScopeName = "github.com/tollgate/tollgate"

// Protocols of OTLP.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Settings is what the environment asks for.
type Settings struct {
	// TracesProtocol and LogsProtocol are "" when that signal is off.
	TracesProtocol, LogsProtocol string
}

// Off reports whether nothing is exported.
func (s Settings) Off() bool { return s.TracesProtocol == "" && s.LogsProtocol == "" }

// SettingsFrom reads the settings from getenv (os.Getenv in a node).
func SettingsFrom(getenv func(string) string) (Settings, error) {
	var s Settings
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return s, nil
	}
	var err error
	if s.TracesProtocol, err = signal(getenv, "TRACES"); err != nil {
		return Settings{}, err
	}
	if s.LogsProtocol, err = signal(getenv, "LOGS"); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// signal returns the protocol one signal ("TRACES", "LOGS") is exported
// with, "" when it is not.
func signal(getenv func(string) string, name string) (string, error) {
	switch exp := strings.TrimSpace(getenv("OTEL_" + name + "_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return "", nil
	default:
		return "", fmt.Errorf("OTEL_%s_EXPORTER=%q: only otlp and none are supported", name, exp)
	}
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_"+name+"_ENDPOINT") == "" {
		return "", nil
	}
	p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name + "_PROTOCOL"))
	if p == "" {
		p = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch p {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("OTLP protocol %q for %s: want grpc or http/protobuf", p, strings.ToLower(name))
}

// Telemetry holds a node's tracer and logger providers. The zero value
// and nil are off.
type Telemetry struct {
	tp     *sdktrace.TracerProvider
	lp     *sdklog.LoggerProvider
	tracer trace.Tracer
	logger otellog.Logger
}

// New sets up what the environment asks for; log receives export errors.
// Nothing is exported (and nothing started) when the environment sets no
// OTLP endpoint.
func New(ctx context.Context, version string, log *slog.Logger) (*Telemetry, error) {
	s, err := SettingsFrom(os.Getenv)
	if err != nil || s.Off() {
		return &Telemetry{}, err
	}
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry export failed", "err", err) }))
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "tollgate"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	t := &Telemetry{}
	if s.TracesProtocol != "" {
		exp, err := newTraceExporter(ctx, s.TracesProtocol)
		if err != nil {
			return nil, err
		}
		// The sampler comes from OTEL_TRACES_SAMPLER (default: parent
		// based, always on), the batching from OTEL_BSP_* (with a larger
		// default queue; a full queue drops spans, never blocks requests).
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, batchOptions(os.Getenv)...), sdktrace.WithResource(res))
		t.tracer = t.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version))
	}
	if s.LogsProtocol != "" {
		exp, err := newLogExporter(ctx, s.LogsProtocol)
		if err != nil {
			_ = t.Shutdown(ctx)
			return nil, err
		}
		t.lp = sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)), sdklog.WithResource(res))
		t.logger = t.lp.Logger(ScopeName, otellog.WithInstrumentationVersion(version))
	}
	return t, nil
}

// DefaultSpanQueue is the span queue of the batch processor unless
// OTEL_BSP_MAX_QUEUE_SIZE says otherwise: at 10,000 requests a second of
// two spans each, about 400 ms of spans (the SDK's 2,048 is 100 ms).
const DefaultSpanQueue = 8192

// batchOptions are the batch span processor's options that differ from
// the SDK's defaults, for the variables not set (the SDK reads those).
func batchOptions(getenv func(string) string) []sdktrace.BatchSpanProcessorOption {
	var o []sdktrace.BatchSpanProcessorOption
	if getenv("OTEL_BSP_MAX_QUEUE_SIZE") == "" {
		o = append(o, sdktrace.WithMaxQueueSize(DefaultSpanQueue))
	}
	return o
}

// newTraceExporter is the OTLP exporter of protocol: the upstream client
// (which reads the OTEL_EXPORTER_OTLP_* variables) under spanExporter.
func newTraceExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	client := otlptracehttp.NewClient()
	if protocol == ProtocolGRPC {
		client = otlptracegrpc.NewClient()
	}
	exp, err := newSpanExporter(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", protocol, err)
	}
	return exp, nil
}

func newLogExporter(ctx context.Context, protocol string) (sdklog.Exporter, error) {
	var exp sdklog.Exporter
	var err error
	if protocol == ProtocolGRPC {
		exp, err = otlploggrpc.New(ctx)
	} else {
		exp, err = otlploghttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP log exporter (%s): %w", protocol, err)
	}
	return exp, nil
}

// Tracer returns the tracer of the data plane; nil when traces are off.
func (t *Telemetry) Tracer() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.tracer
}

// Logger returns the logger request logs are emitted to; nil when logs
// are off.
func (t *Telemetry) Logger() otellog.Logger {
	if t == nil {
		return nil
	}
	return t.logger
}

// Shutdown exports what is still queued and stops the exporters, within
// ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.lp != nil {
		errs = append(errs, t.lp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
