package main

import (
	"flag"

	"github.com/tollgate/tollgate/node"
)

// telemetryFlags defines the flags of traces and request logs. Where
// traces and logs are exported to is not a flag: the standard OTEL_*
// variables say it (OTEL_EXPORTER_OTLP_ENDPOINT and the rest; unset: off).
func telemetryFlags(fs *flag.FlagSet, c *node.TelemetryConfig) {
	fs.BoolVar(&c.TraceContent, "trace-content", envBool("TOLLGATE_TRACE_CONTENT"), "put prompts and answers (truncated to 4 KiB; never headers or keys) on the request spans exported over OTLP; traces themselves are on when OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set [TOLLGATE_TRACE_CONTENT]")
}
