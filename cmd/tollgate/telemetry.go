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
	fs.StringVar(&c.AccessLog, "access-log", envOr("TOLLGATE_ACCESS_LOG", ""), "write one JSON line per finished request (the ledger's fields: ids, model, deployment, tokens, cost, status, latency; never keys or content) to this file, or to standard output with -; empty: off. With OTEL_EXPORTER_OTLP_ENDPOINT (or _LOGS_ENDPOINT) set the same records go out as OTLP logs [TOLLGATE_ACCESS_LOG]")
}
