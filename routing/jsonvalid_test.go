package routing

import (
	"encoding/json"
	"strings"
	"testing"
)

var validJSONCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, `{"a":1}`, `{"a":1,}`, `{,}`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`, `{"a" 1}`,
	`{1:2}`, `[1 2]`, `"abc"`, `"a\"b"`, `"\u00e9"`, `"\u00g9"`, `"\u00"`, `"\x"`, "\"a\tb\"", "\"a\x01\"",
	"\"\xff\xfe\"", `"unterminated`, `"\`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-`, `1e`,
	`-01`, `123456789012345678901234567890`, `1.5e3`, `true`, `false`, `null`, `tru`, `nul`, `truex`,
	`true false`, `[true,false,null]`, `{"a":[{"b":{"c":[1,2,{"d":null}]}}]}`, `{"a":[}`, `[{]}`, `[1]]`,
	`{"a":1}}`, `{"a":1} x`, `{"a":1}` + "\n", "\t[\r\n1\r\n]\t", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`[[[[[]]]]]`, `[[[[[]]]]`, `{"a":"b"`, `{"a"::1}`, `{"a":1 "b":2}`, `[-]`, `[+1]`, `[1e+]`, `"\/"`, `{"\u0061":1}`,
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range validJSONCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%q) = %v, encoding/json says %v", c, got, want)
		}
	}
	// Nesting: encoding/json's limit is 10,000 levels, empty innermost
	// containers included.
	for _, depth := range []int{9999, 10000, 10001} {
		for _, inner := range []string{"", "1"} {
			s := strings.Repeat("[", depth) + inner + strings.Repeat("]", depth)
			if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
				t.Errorf("depth %d inner %q: validJSON %v, encoding/json %v", depth, inner, got, want)
			}
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, c := range validJSONCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	body := []byte(`{"model":"bench","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"` +
		strings.Repeat("Tell me about gateways, \"quoted\" and \\u00e9 escaped. ", 20) + `"}],"temperature":0.7,"max_tokens":256,"stream":false}`)
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			json.Valid(body)
		}
	})
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			validJSON(body)
		}
	})
}

// TestValidJSONLongStringsEveryOffset puts each character the string check
// must stop at (and a few it must not) at every offset of a long string,
// where it is checked 8 bytes at a time.
func TestValidJSONLongStringsEveryOffset(t *testing.T) {
	for _, special := range []string{"\x00", "\x1f", "\n", `"`, `\`, `\"`, `\n`, `\u00e9`, `\u00g9`, "\x20", "\x7f", "\x80", "\xff", "é"} {
		for off := 0; off < 24; off++ {
			for _, tail := range []int{0, 3, 17} {
				s := `{"a":"` + strings.Repeat("x", off) + special + strings.Repeat("y", tail) + `"}`
				if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
					t.Errorf("validJSON(%q) = %v, encoding/json says %v", s, got, want)
				}
			}
		}
	}
}
