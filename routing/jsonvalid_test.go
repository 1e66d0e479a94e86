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

// trickyJSONSeeds are inputs where a hand-written validator tends to part
// from encoding/json.Valid: nesting at the limit, bytes that are not UTF-8,
// lone surrogates, number edge cases, trailing bytes, a BOM and control
// characters in strings, each also inside a long (word-at-a-time) string.
func trickyJSONSeeds() []string {
	long := strings.Repeat("x", 13)
	seeds := []string{
		"\"\xc3\x28\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\x80" + long + "\xbf\"",
		`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\uDBFF\uDFFF"`, `"\ud800\ud800"`, `{"\ud83d":"\ude00"}`,
		`01`, `1.`, `-`, `-.5`, `+1`, `1.e5`, `1e+`, `0x1`, `00`, `-0.0e-0`, `1E01`, `[01]`, `[1.]`, `{"a":-}`, `Infinity`, `NaN`,
		`{} `, `{}x`, `[]]`, `1 2`, `"a" "b"`, `null,`, `true1`, "1\x00", "[]\xef\xbb\xbf",
		"\xef\xbb\xbf{}", "\xef\xbb\xbf1", "\xef\xbb\xbf\"a\"",
		"\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"" + long + "\n" + long + "\"", "\"" + long + "\x1f\"", "{\"\t\":1}",
		"\v1", "\f1", "\u00a01", "1\u00a0", `"\u00"` + long, `"\u12345"`, `"\U0041"`, `"\'"`, `"\a"`,
		strings.Repeat(`{"a":[`, 30) + "1" + strings.Repeat("]}", 30), strings.Repeat("[", 64) + strings.Repeat("]", 65),
	}
	return seeds
}

// deepJSONCases nest at encoding/json's limit of 10,000 levels and past
// it (too large to seed the fuzzer with).
var deepJSONCases = []string{
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	strings.Repeat("[", 9999) + "{}" + strings.Repeat("]", 9999),
	strings.Repeat("[", 10000) + "{}" + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 20000),
}

// TestValidJSONTrickyInputsMatchEncodingJSON pins the fuzzer's tricky seeds
// in the ordinary test run.
func TestValidJSONTrickyInputsMatchEncodingJSON(t *testing.T) {
	for _, c := range append(trickyJSONSeeds(), deepJSONCases...) {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.80q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, c := range append(validJSONCases, trickyJSONSeeds()...) {
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

// TestValidJSONAgreesOnEveryShortInput compares with encoding/json on
// every input of up to four bytes drawn from the bytes that steer the
// grammar (and a few that must be refused or passed through).
func TestValidJSONAgreesOnEveryShortInput(t *testing.T) {
	alphabet := []byte("{}[]\",:01-.eE+\\ut \x00\x80")
	var walk func(b []byte)
	walk = func(b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
		if len(b) == 4 {
			return
		}
		for _, c := range alphabet {
			walk(append(b, c))
		}
	}
	walk(make([]byte, 0, 4))
}
