package routing

import (
	"bytes"
	"strings"
)

// mediaTypes are the "type" values of the content parts that carry an
// image or audio, in the OpenAI chat, Responses and Anthropic formats.
var mediaTypes = map[string]bool{
	"image_url": true, "input_image": true, "image": true,
	"input_audio": true, "audio": true,
}

// CountMedia counts the image and audio parts anywhere in a valid JSON
// body: the objects whose "type" is one of mediaTypes. Their tokens are
// not bounded by their bytes (a small PNG, or a URL, may cost thousands),
// so a budget reservation adds an allowance for each. The member name is
// matched in any case, as Go's decoder (the gateway's translators) reads
// it; it may count more than a decoder sees, never fewer.
func CountMedia(body []byte) int {
	if bytes.Contains(body, []byte(`\u`)) {
		// A name may be spelled with escapes ("typ\u0065"), which every
		// decoder upstream reads as "type": walk the structure, decoding.
		n := 0
		countMedia(body, skipWS(body, 0), &n, 0)
		return n
	}
	// Without \u escapes a member named "type" is spelled with those four
	// letters between quotes: visit each quote at memchr speed. In valid
	// JSON an unescaped quote followed by type" opens that string, and a
	// string followed by a colon is a member name.
	n := 0
	for i := 0; ; {
		j := bytes.IndexByte(body[i:], '"')
		if j < 0 {
			return n
		}
		at := i + j
		i = at + 1
		if at+5 >= len(body) || body[at+5] != '"' || !bytes.EqualFold(body[at+1:at+5], typeName) || escapedQuote(body, at) {
			continue
		}
		k := skipWS(body, at+6)
		if k >= len(body) || body[k] != ':' {
			continue
		}
		i = at + 6
		k = skipWS(body, k+1)
		if k >= len(body) || body[k] != '"' {
			continue
		}
		end := skipString(body, k)
		if lit := body[k:end]; len(lit) >= 2 && mediaTypes[string(lit[1:len(lit)-1])] {
			n++ // no escapes to decode: none of the names has one
		}
		i = end
	}
}

var typeName = []byte("type")

// escapedQuote reports whether the quote at i is escaped (preceded by an
// odd number of backslashes).
func escapedQuote(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// countMedia walks the value at i (depth-limited: validJSON already bounds
// nesting, this keeps the walk's stack small whatever it allows).
func countMedia(b []byte, i int, n *int, depth int) {
	if i >= len(b) || depth > 64 {
		return
	}
	switch b[i] {
	case '{':
		end := skipValue(b, i)
		_ = eachMember(b[i:end], func(name []byte, v Span) error {
			val := b[i+v.Start : i+v.End]
			if strings.EqualFold(string(name), "type") {
				if s, ok := decodeString(val); ok && mediaTypes[s] {
					*n++
				}
			}
			if val[0] == '{' || val[0] == '[' {
				countMedia(b, i+v.Start, n, depth+1)
			}
			return nil
		})
	case '[':
		end := skipValue(b, i)
		j := skipWS(b, i+1)
		for j < end-1 {
			countMedia(b, j, n, depth+1)
			j = skipWS(b, skipValue(b, j))
			if j >= end || b[j] != ',' {
				break
			}
			j = skipWS(b, j+1)
		}
	}
}
