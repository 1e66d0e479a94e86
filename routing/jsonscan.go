package routing

import (
	"encoding/json"
	"errors"
	"strconv"
)

// ErrMalformed is returned for a request body that is not a JSON object.
var ErrMalformed = errors.New("request body is not a valid JSON object")

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
}

// ScanRequest validates body as JSON and reads the top-level members the
// gateway routes on. Nested values are skipped, not decoded.
func ScanRequest(body []byte) (Request, error) {
	req := Request{ModelSpan: Span{-1, -1}, StreamOpts: Span{-1, -1}}
	if !json.Valid(body) {
		return req, ErrMalformed
	}
	err := eachMember(body, func(name []byte, v Span) error {
		val := body[v.Start:v.End]
		switch string(name) {
		case "model":
			s, ok := decodeString(val)
			if !ok {
				return errors.New(`"model" must be a string`)
			}
			req.Model, req.ModelSpan = s, v
		case "stream":
			req.Stream = string(val) == "true"
		case "stream_options":
			req.StreamOpts = v
			if val[0] == '{' {
				_ = eachMember(val, func(n []byte, sv Span) error {
					if string(n) == "include_usage" {
						req.IncludeUsage = string(val[sv.Start:sv.End]) == "true"
					}
					return nil
				})
			}
		case "max_tokens", "max_completion_tokens":
			if n, err := strconv.ParseInt(string(val), 10, 64); err == nil && n > req.MaxTokens {
				req.MaxTokens = n
			}
		}
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

// eachMember calls fn for every member of the JSON object in b (which must
// be valid JSON) with the member's raw name (without quotes, escapes left
// as they are) and the span of its value relative to b.
func eachMember(b []byte, fn func(name []byte, v Span) error) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ErrMalformed
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return ErrMalformed
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] == ',' {
			i = skipWS(b, i+1)
		}
		if i >= len(b) || b[i] != '"' {
			return ErrMalformed
		}
		end := skipString(b, i)
		name := b[i+1 : end-1]
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return ErrMalformed
		}
		i = skipWS(b, i+1)
		vend := skipValue(b, i)
		if err := fn(name, Span{i, vend}); err != nil {
			return err
		}
		i = vend
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index just past the string literal starting at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
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
	if insertUsage && !req.StreamOpts.Present() {
		open := skipWS(body, 0) + 1
		dst = append(dst, body[:open]...)
		dst = append(dst, `"stream_options":{"include_usage":true},`...)
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
