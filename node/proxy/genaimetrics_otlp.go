package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// GenAIOTLP is a Recorder of the OpenTelemetry GenAI semantic conventions'
// metrics with an OpenTelemetry meter (exported over OTLP by the meter's
// provider): the same four histograms, with the same buckets and the same
// bounded attributes, as the Prometheus ones of genAIMetrics. A sampled
// request's span rides in the context, so the SDK can keep it as an
// exemplar.
type GenAIOTLP struct {
	tokens, duration, ttft, tpot metric.Float64Histogram

	// sets caches the attribute sets by their values: label sets are
	// bounded by the routes and deployments, and a set built once spares
	// each observation its sorting and allocation.
	mu   sync.Mutex
	sets map[genAIKey]metric.MeasurementOption
}

// genAIKey is the attributes of one series.
type genAIKey struct {
	op, model, dep, provider, extra string // extra: token type or error type
	token                           bool
}

// maxGenAISets bounds the cached attribute sets; past it sets are built
// per observation.
const maxGenAISets = 4096

// NewGenAIOTLP makes the histograms on meter.
func NewGenAIOTLP(meter metric.Meter) (*GenAIOTLP, error) {
	var errs []error
	h := func(name, unit, desc string, buckets []float64) metric.Float64Histogram {
		x, err := meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return x
	}
	tokens := h("gen_ai.client.token.usage", "{token}", "Tokens per request reported by the upstream, by type (input, output).",
		[]float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864})
	duration := h("gen_ai.server.request.duration", "s", "Time from a request's arrival to the last byte of its answer.",
		[]float64{.01, .02, .04, .08, .16, .32, .64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92})
	ttft := h("gen_ai.server.time_to_first_token", "s", "Time from a streamed request's arrival to the first byte of its answer.",
		[]float64{.001, .005, .01, .02, .04, .06, .08, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10})
	tpot := h("gen_ai.server.time_per_output_token", "s", "Time per output token after the first of a streamed answer.",
		[]float64{.01, .025, .05, .075, .1, .15, .2, .3, .4, .5, .75, 1, 2.5})
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("GenAI metric instruments: %w", err)
	}
	return &GenAIOTLP{tokens: tokens, duration: duration, ttft: ttft, tpot: tpot, sets: map[genAIKey]metric.MeasurementOption{}}, nil
}

// Record implements Recorder: the request's observations, as genAIMetrics
// makes them.
func (m *GenAIOTLP) Record(rec *Record) {
	if rec.Model == "" {
		return // refused before its model was known
	}
	k := genAIKey{op: operationName(rec.Endpoint), model: rec.Model, dep: rec.Deployment}
	if k.dep == "" {
		k.dep = "none"
	}
	if rec.dep != nil {
		k.provider = providerName(rec.dep)
	}
	ctx := context.Background()
	if rec.span != nil && rec.span.SpanContext().IsSampled() {
		ctx = trace.ContextWithSpan(ctx, rec.span)
	}
	dk := k
	if rec.Status >= 400 {
		dk.extra = statusLabel(rec.Status)
	}
	m.duration.Record(ctx, rec.Latency.Seconds(), m.set(dk))
	if u := rec.Usage; u.Present {
		in, out := k, k
		in.token, in.extra, out.token, out.extra = true, "input", true, "output"
		m.tokens.Record(ctx, float64(u.PromptTokens), m.set(in))
		m.tokens.Record(ctx, float64(u.CompletionTokens), m.set(out))
	}
	if !rec.Stream || rec.FirstByte <= 0 || rec.Status >= 400 {
		return
	}
	s := m.set(k)
	m.ttft.Record(ctx, rec.FirstByte.Seconds(), s)
	if n := rec.Usage.CompletionTokens; n > 1 && rec.Latency > rec.FirstByte {
		m.tpot.Record(ctx, (rec.Latency-rec.FirstByte).Seconds()/float64(n-1), s)
	}
}

// set returns the attribute set of k, made once.
func (m *GenAIOTLP) set(k genAIKey) metric.MeasurementOption {
	m.mu.Lock()
	o, ok := m.sets[k]
	m.mu.Unlock()
	if ok {
		return o
	}
	a := make([]attribute.KeyValue, 0, 5)
	a = append(a, attribute.String("gen_ai.operation.name", k.op), attribute.String("gen_ai.request.model", k.model),
		attribute.String("tollgate.deployment", k.dep))
	if k.provider != "" {
		a = append(a, attribute.String("gen_ai.provider.name", k.provider))
	}
	switch {
	case k.token:
		a = append(a, attribute.String("gen_ai.token.type", k.extra))
	case k.extra != "":
		a = append(a, attribute.String("error.type", k.extra))
	}
	o = metric.WithAttributeSet(attribute.NewSet(a...))
	m.mu.Lock()
	if len(m.sets) < maxGenAISets {
		m.sets[k] = o
	}
	m.mu.Unlock()
	return o
}
