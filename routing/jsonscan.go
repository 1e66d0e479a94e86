package routing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformed is returned for a request body that is not a JSON object.
var ErrMalformed = errors.New("request body is not a valid JSON object")

// ErrDuplicate is returned for a body that repeats a member the gateway
// routes on: JSON decoders disagree on which copy wins, so it is refused.
var ErrDuplicate = errors.New("duplicate member")

// Span is a half-open byte range [Start, End) of a body; Start < 0 means the
// member is absent.
type Span struct{ Start, End int }

// Present reports whether the span points at a value.
func (s Span) Present() bool { return s.Start >= 0 }

// Request holds what the gateway needs from an inbound OpenAI-style request
// body, found without decoding the whole body.
type Request struct {
	Model        string
	ModelSpan    Span // the model value, quotes included
	Stream       bool
	IncludeUsage bool // stream_options.include_usage
	StreamOpts   Span // the stream_options value
	MaxTokens    int64
	// Limits are the values of max_tokens, max_completion_tokens and
	// max_output_tokens (see the Limit constants); 0 when absent.
	Limits [3]int64
	// LimitBad: a member names an output limit other than as one positive
	// whole number under its exact name, once (a case variant such as
	// "MAX_TOKENS", which Go's decoder reads but the scan would not; a
	// repeat; null, a string, a fraction, zero or less).
	LimitBad bool
	// Choices is the most answers the request asks for ("n", or
	// "best_of" of legacy completions); 0 when it does not say.
	Choices int64
	// Prompts is the number of prompts of a legacy completions request
	// whose "prompt" is an array of them; 0 otherwise.
	Prompts int64
}

// The indexes of Request.Limits.
const (
	LimitMaxTokens = iota
	LimitMaxCompletionTokens
	LimitMaxOutputTokens
)

var limitNames = [3]string{"max_tokens", "max_completion_tokens", "max_output_tokens"}

// scanLimit records a member whose name is an output limit's in any case.
func (req *Request) scanLimit(name, val []byte) {
	for k, ln := range limitNames {
		if !strings.EqualFold(string(name), ln) {
			continue
		}
		if string(name) != ln || req.Limits[k] != 0 {
			req.LimitBad = true
			return
		}
		n, ok := positiveInt(val)
		if !ok {
			req.LimitBad = true
			return
		}
		req.Limits[k] = n
		return
	}
}

// positiveInt reads a JSON number that is a whole number above zero,
// written without fraction or exponent.
func positiveInt(val []byte) (int64, bool) {
	if len(val) == 0 || len(val) > 18 {
		return 0, false
	}
	for _, c := range val {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(val), 10, 64)
	return n, err == nil && n > 0
}

// countPrompts counts the prompts of a legacy completions "prompt" array:
// an array of strings or of token arrays holds one prompt each; an array
// of numbers is one tokenized prompt.
func countPrompts(val []byte) int64 {
	i := skipWS(val, 1)
	if i >= len(val) || val[i] == ']' {
		return 0
	}
	if val[i] != '"' && val[i] != '[' {
		return 1
	}
	var n int64
	for i < len(val) {
		i = skipWS(val, skipValue(val, i))
		n++
		if i >= len(val) || val[i] != ',' {
			break
		}
		i = skipWS(val, i+1)
	}
	return n
}

// ScanRequest validates body as JSON and reads the top-level members the
// gateway routes on. Nested values are skipped, not decoded.
func ScanRequest(body []byte) (Request, error) {
	req := Request{ModelSpan: Span{-1, -1}, StreamOpts: Span{-1, -1}}
	if !validJSON(body) {
		return req, ErrMalformed
	}
	var seen [3]bool // model, stream, stream_options
	once := func(k int, name []byte) error {
		if seen[k] {
			return fmt.Errorf("%w: the member %q appears twice", ErrDuplicate, name)
		}
		seen[k] = true
		return nil
	}
	err := eachMember(body, func(name []byte, v Span) error {
		val := body[v.Start:v.End]
		switch string(name) {
		case "model":
			if err := once(0, name); err != nil {
				return err
			}
			s, ok := decodeString(val)
			if !ok {
				return errors.New(`"model" must be a string`)
			}
			req.Model, req.ModelSpan = s, v
		case "stream":
			if err := once(1, name); err != nil {
				return err
			}
			req.Stream = string(val) == "true"
		case "stream_options":
			if err := once(2, name); err != nil {
				return err
			}
			req.StreamOpts = v
			if val[0] == '{' {
				_ = eachMember(val, func(n []byte, sv Span) error {
					if string(n) == "include_usage" {
						req.IncludeUsage = string(val[sv.Start:sv.End]) == "true"
					}
					return nil
				})
			}
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			if n, err := strconv.ParseInt(string(val), 10, 64); err == nil && n > req.MaxTokens {
				req.MaxTokens = n
			}
		case "n", "best_of":
			if n, err := strconv.ParseInt(string(val), 10, 64); err == nil && n > req.Choices {
				req.Choices = n
			}
		case "prompt":
			if val[0] == '[' {
				req.Prompts = countPrompts(val)
			}
		}
		req.scanLimit(name, val)
		return nil
	})
	return req, err
}

// decodeString returns the Go string of a JSON string literal.
func decodeString(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' {
		return "", false
	}
	inner := lit[1 : len(lit)-1]
	for _, c := range inner {
		if c == '\\' {
			var s string
			if json.Unmarshal(lit, &s) != nil {
				return "", false
			}
			return s, true
		}
	}
	return string(inner), true
}

// eachMember calls fn for every member of the JSON object in b with the
// member's name (escapes decoded, so that "mod\u0065l" is "model", as every
// JSON decoder upstream will read it) and the span of its value relative to
// b. It never panics, also on input that is not valid JSON, which it
// reports as ErrMalformed.
func eachMember(b []byte, fn func(name []byte, v Span) error) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ErrMalformed
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return ErrMalformed
		}
		end := skipString(b, i)
		if end < i+2 || b[end-1] != '"' {
			return ErrMalformed
		}
		name := b[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var s string
			if json.Unmarshal(b[i:end], &s) != nil {
				return ErrMalformed
			}
			name = []byte(s)
		}
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return ErrMalformed
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return ErrMalformed
		}
		vend := skipValue(b, i)
		if err := fn(name, Span{i, vend}); err != nil {
			return err
		}
		i = skipWS(b, vend)
		if i >= len(b) {
			return ErrMalformed
		}
		switch b[i] {
		case '}':
			return nil
		case ',':
			i = skipWS(b, i+1)
		default:
			return ErrMalformed
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index just past the string literal starting at i.
// It finds the next quote and the next backslash with bytes.IndexByte
// rather than looking at every byte: the usage scan skips an answer's whole
// text. q, the first quote at or after i, is searched again only when an
// escape took it, so every byte is searched at most twice.
func skipString(b []byte, i int) int {
	q := -1
	for i++; i < len(b); {
		if q < i {
			n := bytes.IndexByte(b[i:], '"')
			if n < 0 {
				return len(b)
			}
			q = i + n
		}
		e := bytes.IndexByte(b[i:q], '\\')
		if e < 0 {
			return q + 1
		}
		i += e + 2 // past the backslash and the byte it escapes
	}
	return len(b)
}

// skipValue returns the index just past the (valid) JSON value at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default:
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\n', '\r', '\t':
				return i
			}
		}
		return i
	}
}

// RewriteRequest appends to dst the body with the model replaced by
// upstreamModel and, when forceUsage is set on a streaming request,
// stream_options.include_usage turned on, so that the gateway sees the
// stream's token usage.
func RewriteRequest(dst, body []byte, req *Request, upstreamModel string, forceUsage bool) []byte {
	return RewriteRequestCapped(dst, body, req, upstreamModel, forceUsage, "", 0)
}

// RewriteRequestCapped is RewriteRequest that also adds the member
// capField with the value limit (an output token limit the request did
// not set) when capField is not empty.
func RewriteRequestCapped(dst, body []byte, req *Request, upstreamModel string, forceUsage bool, capField string, limit int64) []byte {
	type edit struct {
		span Span
		with []byte
	}
	var edits [2]edit
	n := 0
	quoted := strconv.AppendQuote(make([]byte, 0, len(upstreamModel)+2), upstreamModel)
	if !isPlainASCII(upstreamModel) {
		quoted, _ = json.Marshal(upstreamModel)
	}
	if req.ModelSpan.Present() {
		edits[n] = edit{req.ModelSpan, quoted}
		n++
	}
	insertUsage := forceUsage && req.Stream && !req.IncludeUsage
	if insertUsage && req.StreamOpts.Present() {
		edits[n] = edit{req.StreamOpts, mergeIncludeUsage(body[req.StreamOpts.Start:req.StreamOpts.End])}
		n++
	}
	if n == 2 && edits[1].span.Start < edits[0].span.Start {
		edits[0], edits[1] = edits[1], edits[0]
	}
	pos := 0
	if (insertUsage && !req.StreamOpts.Present()) || capField != "" {
		open := skipWS(body, 0) + 1
		dst = append(dst, body[:open]...)
		if insertUsage && !req.StreamOpts.Present() {
			dst = append(dst, `"stream_options":{"include_usage":true},`...)
		}
		if capField != "" {
			dst = append(dst, '"')
			dst = append(dst, capField...)
			dst = append(dst, `":`...)
			dst = strconv.AppendInt(dst, limit, 10)
			dst = append(dst, ',')
		}
		pos = open
	}
	for _, e := range edits[:n] {
		dst = append(dst, body[pos:e.span.Start]...)
		dst = append(dst, e.with...)
		pos = e.span.End
	}
	return append(dst, body[pos:]...)
}

// isPlainASCII reports whether strconv.Quote and JSON quoting agree on s.
func isPlainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

func mergeIncludeUsage(opts []byte) []byte {
	m := map[string]json.RawMessage{}
	if json.Unmarshal(opts, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	m["include_usage"] = json.RawMessage("true")
	out, _ := json.Marshal(m)
	return out
}
