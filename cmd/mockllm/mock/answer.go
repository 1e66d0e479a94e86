package mock

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds what every wire format shares about the answer to a chat
// request: each format decodes its request into a turn, and turn.plan lays
// out the reply that the format then encodes.
//
// The rules, identical in every format:
//   - images in the request (any message) make the answer text start with
//     "I see N image(s). ";
//   - when the last message is a tool result, the answer text (after the
//     image sentence, if any) starts with "Tool result received: " followed
//     by the first 40 bytes of the result's text (cut back to a rune
//     boundary) and a newline;
//   - otherwise, when the request defines tools (and does not forbid calling
//     them), the answer is a call to the first tool (or to the tool the
//     request forces), with arguments built from its parameter schema by
//     schemaArgs; the image sentence, if any, comes as a text part before it;
//   - otherwise the answer is text: the prefix above and then the regular
//     content ("Hello from mockllm. ...", size bytes, or the stream tokens;
//     in a stream the prefix rides on the first text delta).
//
// Usage: the prompt counts ceil(chars/4) tokens (at least 1) of its text.
// When the system prompt is over 100 bytes, half of those are reported as
// read from a prompt cache: Anthropic's cache_read_input_tokens and
// Bedrock's cacheReadInputTokens, excluded from input_tokens/inputTokens as
// those APIs do, and Gemini's cachedContentTokenCount, included in
// promptTokenCount as Gemini does. The cache-write directive adds that many
// tokens written to the cache: Anthropic's cache_creation_input_tokens and
// Bedrock's cacheWriteInputTokens, also outside input_tokens/inputTokens;
// the other formats count them in the prompt. The output counts ceil(bytes/4) tokens of
// the text, one token per streamed text delta, and for a tool call
// ceil(len(prefix)/4) + ceil((len(name)+len(arguments))/4).
//
// An output limit (Anthropic max_tokens, Gemini maxOutputTokens, Bedrock
// inferenceConfig.maxTokens; OpenAI's is not read) cuts a text answer to that
// many tokens (4 bytes each, or that many stream deltas) and makes the stop
// reason max_tokens (Gemini: MAX_TOKENS).

// turn is the format-neutral digest of a chat request.
type turn struct {
	promptChars int    // characters of the prompt's text: system, messages, tool results
	systemBytes int    // bytes of the system prompt's text
	images      int    // image parts anywhere in the messages
	hasResult   bool   // the last message is a tool result
	result      string // the text of that tool result
	tools       []tool // function tools, in request order
	choice      string // "" (auto), choiceNone, or the name of a tool the request forces
	maxTokens   int    // output token limit; 0 means none
}

// choiceNone is turn.choice for a request that forbids tool calls.
const choiceNone = "\x00none"

type tool struct {
	name   string
	schema json.RawMessage // JSON schema of the arguments; may be empty
}

// stop conditions of an answer
const (
	stopEnd  = iota // the model finished
	stopTool        // the answer is a tool call
	stopMax         // the output limit cut the answer short
)

// reply is an answer laid out for one response.
type reply struct {
	prefix string // image and tool-result sentences; "" if none
	tool   *tool  // non-nil: the answer calls this tool
	args   []byte // the call's arguments, a JSON object
	// text is the whole answer text of a non-stream response: prefix and
	// content, or only the prefix when the answer is a tool call.
	text string
	// deltas is the number of text deltas of a stream: chunks (capped by the
	// output limit) for a text answer; for a tool call 1 if there is a
	// prefix, else 0.
	deltas int
	stop   int
	// prompt counts the prompt's tokens, cached and cache-written ones
	// included; cached is the share reported as read from a prompt cache,
	// written the share reported as written to it; output counts the
	// answer's tokens (a stream's text deltas count one token each).
	prompt, cached, written, output int
}

// cacheThreshold is the system prompt size above which half of the prompt's
// tokens are reported as read from a prompt cache.
const cacheThreshold = 100

// plan lays out the reply to t with the knobs p.
func (t *turn) plan(p *params, stream bool) reply {
	r := reply{prefix: t.prefix(), prompt: max(1, tokens(t.promptChars))}
	if t.systemBytes > cacheThreshold {
		r.cached = r.prompt / 2
	}
	r.written = p.cacheWrite
	r.prompt += r.written
	if !t.hasResult && len(t.tools) > 0 && t.choice != choiceNone {
		r.tool = &t.tools[0]
		for i := range t.tools {
			if t.tools[i].name == t.choice {
				r.tool = &t.tools[i]
				break
			}
		}
		r.args = schemaArgs(r.tool.schema)
		r.stop = stopTool
		r.text = r.prefix
		if r.prefix != "" {
			r.deltas = 1
		}
		r.output = tokens(len(r.prefix)) + tokens(len(r.tool.name)+len(r.args))
		return r
	}
	if stream {
		r.deltas = p.chunks
		if t.maxTokens > 0 && r.deltas > t.maxTokens {
			r.deltas, r.stop = t.maxTokens, stopMax
		}
		r.output = r.deltas
		return r
	}
	r.text = r.prefix + content(p.size)
	if t.maxTokens > 0 && tokens(len(r.text)) > t.maxTokens {
		r.text, r.stop = cutUTF8(r.text, 4*t.maxTokens), stopMax
	}
	r.output = tokens(len(r.text))
	return r
}

// prefix returns the sentences that start the answer text.
func (t *turn) prefix() string {
	if t.images == 0 && !t.hasResult {
		return ""
	}
	var b []byte
	if t.images > 0 {
		b = append(b, "I see "...)
		b = strconv.AppendInt(b, int64(t.images), 10)
		b = append(b, " image(s). "...)
	}
	if t.hasResult {
		b = append(b, "Tool result received: "...)
		b = append(b, cutUTF8(t.result, 40)...)
		b = append(b, '\n')
	}
	return string(b)
}

// delta returns the JSON-escaped text of stream text delta i: the escaped
// prefix on the first delta and then a stream token (none for a tool call).
func (r *reply) delta(b []byte, i int) []byte {
	if i == 0 {
		b = appendEscaped(b, r.prefix)
	}
	if r.tool == nil {
		b = append(b, streamTokens[i%len(streamTokens)]...)
	}
	return b
}

// pieces returns the offsets that split the tool call's arguments into
// chunks pieces (at least 2, at most one per rune), at rune boundaries:
// piece i is args[off[i]:off[i+1]].
func (r *reply) pieces(chunks int) []int {
	var starts []int
	for i := range string(r.args) {
		starts = append(starts, i)
	}
	n := min(max(chunks, 2), len(starts))
	off := make([]int, n+1)
	for i := range n {
		off[i] = starts[i*len(starts)/n]
	}
	off[n] = len(r.args)
	return off
}

func runeCount(s string) int { return utf8.RuneCountInString(s) }

// cutUTF8 returns at most n bytes of s, cut back to a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// schemaArgs builds tool-call arguments from a JSON schema: each required
// property of type string gets "mock", number or integer 1, boolean true;
// other properties are omitted. Keys follow the order of "required". Type
// names are matched case-insensitively (Gemini writes "STRING"); a type list
// such as ["string","null"] counts as its first non-null type.
func schemaArgs(schema json.RawMessage) []byte {
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	b := []byte{'{'}
	if len(schema) > 0 && json.Unmarshal(schema, &s) == nil {
		seen := map[string]bool{}
		for _, name := range s.Required {
			prop, ok := s.Properties[name]
			if !ok || seen[name] {
				continue
			}
			seen[name] = true
			var v string
			switch schemaType(prop.Type) {
			case "string":
				v = `"mock"`
			case "number", "integer":
				v = "1"
			case "boolean":
				v = "true"
			default:
				continue
			}
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(appendString(b, name), ':')
			b = append(b, v...)
		}
	}
	return append(b, '}')
}

func schemaType(raw json.RawMessage) string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return strings.ToLower(one)
	}
	var list []string
	_ = json.Unmarshal(raw, &list)
	for _, t := range list {
		if t = strings.ToLower(t); t != "null" {
			return t
		}
	}
	return ""
}

// jsonText returns the text of a tool result given as JSON: a string is
// unquoted; an object with exactly one property whose value is a string
// (e.g. {"result":"sunny"}) yields that string; anything else yields its
// compact JSON encoding.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil && len(obj) == 1 {
		for _, v := range obj {
			if json.Unmarshal(v, &s) == nil {
				return s
			}
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}
