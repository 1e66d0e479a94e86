package mock

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	faultNone = iota
	faultReset
	faultHang
	faultMidStream

	maxChunks = 1_000_000
	maxSize   = 64 << 20
)

// params are the knobs of one request: the server defaults overridden by
// X-Mock-* headers and then by directives in the model name.
type params struct {
	latency, interval time.Duration
	chunks, size      int
	cacheWrite        int // prompt tokens reported as written to the prompt cache
	status            int // 0: no injected error
	fault             int
}

// fromHeaders applies X-Mock-<Name> headers (the last value of each wins).
func (p *params) fromHeaders(h http.Header) error {
	const prefix = "X-Mock-"
	for k, vs := range h {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix && len(vs) > 0 {
			if err := p.set(strings.ToLower(k[len(prefix):]), vs[len(vs)-1]); err != nil {
				return fmt.Errorf("header %s: %w", k, err)
			}
		}
	}
	return nil
}

// fromQuery applies the directives after the '?' of a model name,
// e.g. "status=500" or "latency=300ms&chunks=50&interval=5ms".
func (p *params) fromQuery(q string) error {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if u, err := url.QueryUnescape(v); err == nil {
			v = u
		}
		if err := p.set(k, v); err != nil {
			return fmt.Errorf("model directive %q: %w", kv, err)
		}
	}
	return nil
}

var errDirective = errors.New("unknown mock directive; known: status, fault, latency, chunks, interval, size, cache-write")

// set applies one directive. Names and values:
//
//	status=400..599                  respond with that status and an error body in the route's format
//	                                 (OpenAI and Anthropic add Retry-After: 1 to a 429)
//	fault=reset|hang|reset-mid-stream  TCP reset, no response until the client leaves, or reset after half the output
//	latency=<duration>               delay before the response headers, e.g. 250ms
//	chunks=1..1000000                stream chunks: text deltas, or the pieces of a tool call's arguments
//	interval=<duration>              gap between stream chunks
//	size=0..67108864                 content bytes of a non-stream completion
//	cache-write=0..100000000         prompt tokens reported as written to the prompt cache, on top of
//	                                 the counted prompt (Anthropic's cache_creation_input_tokens,
//	                                 Bedrock's cacheWriteInputTokens; in prompt_tokens elsewhere)
func (p *params) set(name, v string) error {
	var err error
	switch name {
	case "status":
		p.status, err = intIn(v, 400, 599)
	case "fault":
		switch v {
		case "reset":
			p.fault = faultReset
		case "hang":
			p.fault = faultHang
		case "reset-mid-stream":
			p.fault = faultMidStream
		case "none", "":
			p.fault = faultNone
		default:
			err = fmt.Errorf("unknown fault %q (want reset, hang or reset-mid-stream)", v)
		}
	case "latency":
		p.latency, err = duration(v)
	case "interval":
		p.interval, err = duration(v)
	case "chunks":
		p.chunks, err = intIn(v, 1, maxChunks)
	case "size":
		p.size, err = intIn(v, 0, maxSize)
	case "cache-write":
		p.cacheWrite, err = intIn(v, 0, 100_000_000)
	default:
		err = errDirective
	}
	return err
}

func intIn(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("invalid value %q (want an integer in [%d, %d])", v, lo, hi)
	}
	return n, nil
}

func duration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 250ms)", v)
	}
	return d, nil
}
