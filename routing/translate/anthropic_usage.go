package translate

// The one decoder of Anthropic usage: every path that reads what an
// Anthropic Messages answer cost (the translating stream decoder, the
// translating answer decoder and the proxy's native pass-through) reads it
// here, so that billing sees the same numbers whichever path served the
// request.

import (
	"bytes"
	"encoding/json"
)

// anthropicUsage is a Message's usage.
type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// anthropicCanonicalUsage converts Anthropic's usage: input_tokens counts
// only the uncached part of the prompt, so the prompt is its sum with the
// cache reads and writes.
func anthropicCanonicalUsage(u anthropicUsage) *Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	return &Usage{
		PromptTokens:        prompt,
		CompletionTokens:    u.OutputTokens,
		TotalTokens:         prompt + u.OutputTokens,
		PromptTokensDetails: &TokenDetails{CachedTokens: u.CacheReadInputTokens},
		CacheCreationTokens: u.CacheCreationInputTokens,
	}
}

// AnthropicBodyUsage reads the usage of a whole (not streamed) Messages
// response: nil when the body has none, an error when the body is not a
// JSON object.
func AnthropicBodyUsage(body []byte) (*Usage, error) {
	var msg struct {
		Usage *anthropicUsage `json:"usage"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, err
	}
	if msg.Usage == nil {
		return nil, nil
	}
	return anthropicCanonicalUsage(*msg.Usage), nil
}

// AnthropicStreamUsage gathers the usage of a Messages stream from its
// events. message_start's message carries the prompt's counts (and an
// output count of 0 or 1); message_delta carries the counts so far, any of
// which may be absent (older API versions send only output_tokens). The
// counts are cumulative, so each one is the largest value any event
// reported: an absent, null or lower count (some Anthropic-compatible
// upstreams send 0 for the input in message_delta) never lowers what was
// already read. The zero value is ready to use.
type AnthropicStreamUsage struct {
	u       anthropicUsage
	present bool
}

// anthropicUsageCounts is usage as an event carries it: each count may be
// absent.
type anthropicUsageCounts struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

var anthropicUsageName = []byte(`"usage"`)

// Event reads the usage one stream event carries, given the event's name
// (its "event:" line, used when the data has no "type") and data, and
// reports whether it carried any (then Usage has changed, or may have).
// Events without usage, and data that is not JSON, are passed over:
// reporting a malformed stream is the relay's or the decoder's job.
func (a *AnthropicStreamUsage) Event(name string, data []byte) bool {
	if !bytes.Contains(data, anthropicUsageName) {
		return false
	}
	var ev struct {
		Type    string `json:"type"`
		Message *struct {
			Usage *anthropicUsageCounts `json:"usage"`
		} `json:"message"`
		Usage *anthropicUsageCounts `json:"usage"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	typ := ev.Type
	if typ == "" {
		typ = name
	}
	switch {
	case typ == "message_start" && ev.Message != nil && ev.Message.Usage != nil:
		a.merge(ev.Message.Usage)
	case typ == "message_delta" && ev.Usage != nil:
		a.merge(ev.Usage)
	default:
		return false
	}
	return true
}

func (a *AnthropicStreamUsage) merge(c *anthropicUsageCounts) {
	a.present = true
	anthropicRaise(&a.u.InputTokens, c.InputTokens)
	anthropicRaise(&a.u.OutputTokens, c.OutputTokens)
	anthropicRaise(&a.u.CacheCreationInputTokens, c.CacheCreationInputTokens)
	anthropicRaise(&a.u.CacheReadInputTokens, c.CacheReadInputTokens)
}

// anthropicRaise sets *dst to v when v is present and larger.
func anthropicRaise(dst *int64, v *int64) {
	if v != nil && *v > *dst {
		*dst = *v
	}
}

// Usage returns the usage read so far in the canonical form, nil when no
// event carried any.
func (a *AnthropicStreamUsage) Usage() *Usage {
	if !a.present {
		return nil
	}
	return anthropicCanonicalUsage(a.u)
}
