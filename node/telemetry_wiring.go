package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/node/telemetry"
)

// TelemetryConfig configures traces, request logs and the GenAI metrics
// over OTLP. Where they are exported to comes from the standard OTEL_*
// environment variables (see package telemetry); with none set, nothing is
// traced nor exported.
type TelemetryConfig struct {
	// TraceContent puts prompts and answers, truncated, on the spans.
	TraceContent bool
	// AccessLog, when set, receives one JSON line per finished request:
	// "-" is standard output, anything else a file appended to.
	AccessLog string
}

// wireTelemetry sets up the exporters the environment asks for and
// plugs them into the data plane's config; reg gets the count of spans
// dropped because the export queue was full.
func (n *Node) wireTelemetry(pc *proxy.Config, reg prometheus.Registerer) error {
	tel, err := telemetry.New(context.Background(), n.cfg.Version, n.log)
	if err != nil {
		return err
	}
	n.tel = tel
	pc.Tracer, pc.TraceContent = tel.Tracer(), n.cfg.Telemetry.TraceContent
	if pc.Tracer != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tollgate_trace_spans_dropped_total",
			Help: "Spans not exported because the OTLP export queue was full (OTEL_BSP_MAX_QUEUE_SIZE)"},
			func() float64 { return float64(tel.DroppedSpans()) }))
	}
	var access io.Writer
	switch path := n.cfg.Telemetry.AccessLog; path {
	case "":
	case "-":
		access = os.Stdout
	default:
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("--access-log: %w", err)
		}
		n.accessLog, access = f, f
	}
	if access != nil || tel.Logger() != nil {
		pc.Recorders = append(pc.Recorders, proxy.NewRequestLog(n.cfg.NodeID, tel.Logger(), access))
	}
	if meter := tel.Meter(); meter != nil {
		m, err := proxy.NewGenAIOTLP(meter)
		if err != nil {
			return err
		}
		pc.Recorders = append(pc.Recorders, m)
	}
	return nil
}

// closeTelemetry exports what is still queued, for a few seconds at most.
func (n *Node) closeTelemetry() {
	if n.accessLog != nil {
		_ = n.accessLog.Close()
	}
	if n.tel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.tel.Shutdown(ctx); err != nil {
		n.log.Warn("telemetry: could not export everything at shutdown", "err", err)
	}
}
