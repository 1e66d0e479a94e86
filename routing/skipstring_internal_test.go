package routing

import (
	"strings"
	"testing"
)

// skipStringByteWise is skipString as it was before plain runs were skipped
// a word at a time: the reference the fast one must agree with.
func skipStringByteWise(b []byte, i int) int {
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

// TestSkipStringAgreesWithByteWiseScan puts quotes, escapes (also a
// backslash as the last byte and escaped backslashes before a quote) and
// control characters at every offset of strings longer and shorter than a
// word, terminated and not, and checks the end skipString finds.
func TestSkipStringAgreesWithByteWiseScan(t *testing.T) {
	specials := []string{`"`, `\"`, `\\`, `\\"`, `\`, "\x01", "\n", `\u0022`, "é", `"x"`,
		`\"\"`, `\\\"`, `a\"b"c`, `\n\t\\`, `\\\\"`}
	for n := 0; n <= 40; n++ {
		for pos := 0; pos <= n; pos++ {
			for _, sp := range specials {
				body := strings.Repeat("a", pos) + sp + strings.Repeat("b", n-pos)
				for _, tail := range []string{`"`, `",`, ""} {
					b := []byte(`"` + body + tail)
					if got, want := skipString(b, 0), skipStringByteWise(b, 0); got != want {
						t.Fatalf("skipString(%q) = %d, want %d", b, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkSkipString1000: the answer text of the benchmark's 1 KB chat
// completion, as the usage scan skips it.
func BenchmarkSkipString1000(b *testing.B) {
	s := []byte(`"` + strings.Repeat("lorem ipsum ", 84) + `"`)
	for b.Loop() {
		if skipString(s, 0) != len(s) {
			b.Fatal("wrong end")
		}
	}
}
