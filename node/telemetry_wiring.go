package node

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/node/telemetry"
)

// TelemetryConfig configures traces and request logs. Where they are
// exported to comes from the standard OTEL_* environment variables (see
// package telemetry); with none set, nothing is traced.
type TelemetryConfig struct {
	// TraceContent puts prompts and answers, truncated, on the spans.
	TraceContent bool
}

// wireTelemetry sets up the exporters the environment asks for and
// plugs them into the data plane's config.
func (n *Node) wireTelemetry(pc *proxy.Config) error {
	tel, err := telemetry.New(context.Background(), n.cfg.Version, n.log)
	if err != nil {
		return err
	}
	n.tel = tel
	pc.Tracer, pc.TraceContent = tel.Tracer(), n.cfg.Telemetry.TraceContent
	return nil
}

// closeTelemetry exports what is still queued, for a few seconds at most.
func (n *Node) closeTelemetry() {
	if n.tel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.tel.Shutdown(ctx); err != nil {
		n.log.Warn("telemetry: could not export everything at shutdown", "err", err)
	}
}
