package routing

import (
	"bytes"
	"strconv"
)

// Usage is the token usage an upstream reported for one request.
type Usage struct {
	// PromptTokens counts every prompt token, cached and cache-written ones
	// included (OpenAI's prompt_tokens; Anthropic's input_tokens plus its
	// cache reads and writes).
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	// CachedTokens were read from the provider's prompt cache.
	CachedTokens int64
	// CacheWriteTokens were written to the provider's prompt cache
	// (Anthropic's cache_creation_input_tokens, Bedrock's
	// cacheWriteInputTokens).
	CacheWriteTokens int64
	// Present is set when the upstream reported usage at all.
	Present bool
}

var usageName = []byte(`"usage"`)

// UsageFromBody reads the top-level "usage" member of a JSON response body
// (OpenAI chat, completions and embeddings shapes). It allocates nothing.
func UsageFromBody(body []byte) Usage {
	var u Usage
	if !bytes.Contains(body, usageName) {
		return u
	}
	_ = eachMember(body, func(name []byte, v Span) error {
		if string(name) == "usage" {
			u = parseUsage(body[v.Start:v.End])
		}
		return nil
	})
	return u
}

// ChunkUsage inspects the JSON data of one streamed chunk. It returns the
// usage the chunk carries, and whether the chunk is the usage-only chunk
// OpenAI sends last when stream_options.include_usage is on (empty choices).
// A Responses API event carries it in its "response" (response.completed,
// .incomplete and .failed). Chunks without a "usage" member cost one
// bytes.Contains.
func ChunkUsage(data []byte) (u Usage, usageOnly bool) {
	if !bytes.Contains(data, usageName) {
		return u, false
	}
	emptyChoices := false
	err := eachMember(data, func(name []byte, v Span) error {
		switch string(name) {
		case "usage":
			u = parseUsage(data[v.Start:v.End])
		case "response":
			if r := UsageFromBody(data[v.Start:v.End]); r.Present {
				u = r
			}
		case "choices":
			val := data[v.Start:v.End]
			emptyChoices = len(val) >= 2 && val[0] == '[' && len(bytes.TrimSpace(val[1:len(val)-1])) == 0
		}
		return nil
	})
	if err != nil {
		return Usage{}, false
	}
	return u, u.Present && emptyChoices
}

func parseUsage(v []byte) Usage {
	var u Usage
	if len(v) == 0 || v[0] != '{' {
		return u
	}
	u.Present = true
	_ = eachMember(v, func(name []byte, s Span) error {
		val := v[s.Start:s.End]
		switch string(name) {
		case "prompt_tokens", "input_tokens":
			u.PromptTokens = atoi(val)
		case "completion_tokens", "output_tokens":
			u.CompletionTokens = atoi(val)
		case "total_tokens":
			u.TotalTokens = atoi(val)
		case "prompt_tokens_details", "input_tokens_details":
			if len(val) > 0 && val[0] == '{' {
				_ = eachMember(val, func(n []byte, d Span) error {
					if string(n) == "cached_tokens" {
						u.CachedTokens = atoi(val[d.Start:d.End])
					}
					return nil
				})
			}
		}
		return nil
	})
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

func atoi(b []byte) int64 {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
