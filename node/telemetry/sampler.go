package telemetry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// sampler is the head sampler of OTEL_TRACES_SAMPLER and _ARG, with the
// SDK's semantics: parentBased follows a parent's sampled flag (a remote
// one from traceparent, or the request's own server span) and applies
// the root decision only to a span without a parent; the ratio keeps a
// trace when the lower 63 bits of its id's last 8 bytes are below
// ratio·2^63, as the SDK's TraceIDRatioBased does, so that every node of a
// trace decides alike.
type sampler struct {
	parentBased bool
	// bound: a root is sampled when its trace id's value is below it;
	// all: every root is sampled (ratio ≥ 1), none: no root (ratio ≤ 0).
	bound     uint64
	all, none bool
}

// sampled decides for a new span with parent (invalid: a root) and trace
// id tid. A child of a span of ours always follows it: the decision is
// taken once per request, at its server span.
func (s sampler) sampled(parent trace.SpanContext, tid trace.TraceID) bool {
	if parent.IsValid() && (s.parentBased || !parent.IsRemote()) {
		return parent.IsSampled()
	}
	switch {
	case s.all:
		return true
	case s.none:
		return false
	}
	return binary.BigEndian.Uint64(tid[8:16])>>1 < s.bound
}

// defaultSampler is the SDK's default: parent based, always on.
var defaultSampler = sampler{parentBased: true, all: true}

// samplerFrom reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. As
// the SDK, it falls back to the default for an unknown sampler and to a
// ratio of 1 for a bad argument, and reports the error.
func samplerFrom(getenv func(string) string) (sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	switch name {
	case "", "parentbased_always_on":
		return defaultSampler, nil
	case "always_on":
		return sampler{all: true}, nil
	case "always_off":
		return sampler{none: true}, nil
	case "parentbased_always_off":
		return sampler{parentBased: true, none: true}, nil
	case "traceidratio", "parentbased_traceidratio":
		s, err := ratioSampler(arg)
		s.parentBased = name != "traceidratio"
		return s, err
	}
	return defaultSampler, fmt.Errorf("OTEL_TRACES_SAMPLER=%q is not supported: using parentbased_always_on", name)
}

// ratioSampler is the trace id ratio of arg (1 when empty or bad).
func ratioSampler(arg string) (sampler, error) {
	if arg == "" {
		return sampler{all: true}, nil
	}
	v, err := strconv.ParseFloat(arg, 64)
	switch {
	case err != nil:
		return sampler{all: true}, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: %w: using 1", arg, errors.Unwrap(err))
	case v < 0 || v > 1:
		return sampler{all: true}, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: not within [0, 1]: using 1", arg)
	case v >= 1:
		return sampler{all: true}, nil
	case v <= 0:
		return sampler{none: true}, nil
	}
	return sampler{bound: uint64(v * (1 << 63))}, nil
}
