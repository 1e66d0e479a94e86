package raftstore

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func viewWithModels(t *testing.T, models ...string) *Key {
	return mustKey(t, &pb.StoredKey{Key: &pb.Key{Id: "k", Models: models}, SecretHash: hashOf("s")})
}

func TestKeyAllows(t *testing.T) {
	cases := []struct {
		models  []string
		allowed []string
		refused []string
	}{
		{models: nil, allowed: []string{"gpt-4o", "", "anything*"}},
		{models: []string{}, allowed: []string{"gpt-4o"}},
		{models: []string{"*"}, allowed: []string{"gpt-4o", "", "x"}},
		{models: []string{"gpt-4o", "*"}, allowed: []string{"claude", "gpt-4o"}},
		{models: []string{"gpt-4o"}, allowed: []string{"gpt-4o"}, refused: []string{"gpt-4o-mini", "gpt-4", "GPT-4O", "", "gpt-4o "}},
		{models: []string{"gpt-4o", "o1"}, allowed: []string{"gpt-4o", "o1"}, refused: []string{"o1-mini", "o"}},
		{models: []string{"gpt-4*"}, allowed: []string{"gpt-4", "gpt-4o", "gpt-4o-mini", "gpt-4*"}, refused: []string{"gpt-3.5", "xgpt-4o", "gpt4"}},
		{models: []string{"*-mini"}, allowed: []string{"gpt-4o-mini", "-mini", "o1-mini"}, refused: []string{"gpt-4o-mini-2", "mini", "gpt-4o"}},
		{models: []string{"a*b*c"}, allowed: []string{"abc", "aXbYc", "abbc", "acbc", "abcabc", "a-b-c"}, refused: []string{"ab", "bc", "acb", "abcd", "xabc", "ac"}},
		{models: []string{"claude-*", "gpt-4o"}, allowed: []string{"claude-3", "gpt-4o"}, refused: []string{"claude", "gpt-4o-mini"}},
		{models: []string{"a*a"}, allowed: []string{"aa", "aba"}, refused: []string{"a"}},
	}
	for _, tc := range cases {
		k := viewWithModels(t, tc.models...)
		for _, m := range tc.allowed {
			if !k.Allows(m) {
				t.Errorf("models %q: Allows(%q) = false, want true", tc.models, m)
			}
		}
		for _, m := range tc.refused {
			if k.Allows(m) {
				t.Errorf("models %q: Allows(%q) = true, want false", tc.models, m)
			}
		}
	}
}

func TestKeyViewFields(t *testing.T) {
	sk := &pb.StoredKey{Key: &pb.Key{Id: "k", Name: "n", RevokedAt: ts(5), ExpiresAt: ts(baseNanos)}, SecretHash: hashOf("s")}
	k := mustKey(t, sk)
	if k.ID != "k" || k.Name != "n" || !k.Revoked || k.ExpiresAt != baseNanos {
		t.Errorf("view = %+v", k)
	}
}

func TestKeyExpired(t *testing.T) {
	never := &Key{}
	if never.Expired(0) || never.Expired(1<<62) || never.Expired(-1) {
		t.Error("key without expiry expired")
	}
	k := &Key{ExpiresAt: baseNanos}
	for now, want := range map[int64]bool{0: false, baseNanos - 1: false, baseNanos: true, baseNanos + 1: true, 1 << 62: true} {
		if got := k.Expired(now); got != want {
			t.Errorf("Expired(%d) = %v, want %v", now, got, want)
		}
	}
}

func TestMatchPattern(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"", "", true},
		{"", "a", false},
		{"a", "", false},
		{"abc", "abc", true},
		{"abc", "abd", false},
		{"abc", "ab", false},
		{"*", "", true},
		{"*", "anything", true},
		{"**", "", true},
		{"**", "x", true},
		{"a*", "a", true},
		{"a*", "abc", true},
		{"a*", "ba", false},
		{"*a", "a", true},
		{"*a", "bca", true},
		{"*a", "ab", false},
		{"gpt-4*", "gpt-4o", true},
		{"gpt-4*", "gpt-4", true},
		{"gpt-4*", "gpt-3.5", false},
		{"*-mini", "gpt-4o-mini", true},
		{"*-mini", "gpt-4o-mini-x", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "acb", false},
		{"a*b*c", "abcc", true},
		{"a*b*c", "abcb", false},
		{"a*b*c", "ab", false},
		{"*b*", "b", true},
		{"*b*", "abc", true},
		{"*b*", "ac", false},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"ab*ba", "aba", false},
		{"ab*ba", "abba", true},
		{"*ab*ab*", "abab", true},
		{"*ab*ab*", "aab", false},
		{"a**b", "ab", true},
		{"?", "a", false}, // only '*' is special
		{"[a]", "a", false},
		{"[a]", "[a]", true},
		{"a.c", "abc", false},
		{"é*", "éa", true},
		{"*é", "aé", true},
		{"x*", "x\n", true},
	}
	for _, tc := range cases {
		if got := MatchPattern(tc.pattern, tc.name); got != tc.want {
			t.Errorf("MatchPattern(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

// TestMatchPatternLongInput guards against backtracking blow-up: the model
// name comes from the client's request.
func TestMatchPatternLongInput(t *testing.T) {
	name := strings.Repeat("a", 1<<16)
	for _, p := range []string{"a*b*c", "*a*a*a*a*a*a*a*a*a*a*b", "*a*a*a*a*a*a*a*a*a*a*"} {
		want := strings.HasSuffix(p, "*")
		if got := MatchPattern(p, name); got != want {
			t.Errorf("MatchPattern(%q, a×%d) = %v, want %v", p, len(name), got, want)
		}
	}
	k := viewWithModels(t, "a*b*c", "*x*y*z")
	if k.Allows("a" + strings.Repeat("b", 1<<16)) {
		t.Error("long name allowed")
	}
}

// refMatch is a reference implementation: the pattern as an anchored
// regular expression with every '*' as ".*".
func refMatch(t *testing.T, pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re, err := regexp.Compile(`(?s)\A` + strings.Join(parts, ".*") + `\z`)
	if err != nil {
		t.Fatalf("compile reference for %q: %v", pattern, err)
	}
	return re.MatchString(name)
}

func FuzzMatchPattern(f *testing.F) {
	seeds := [][2]string{
		{"", ""}, {"*", ""}, {"gpt-4*", "gpt-4o"}, {"*-mini", "o1-mini"}, {"a*b*c", "abcbc"},
		{"a*a", "a"}, {"ab*ba", "aba"}, {"*ab*ab*", "aab"}, {"**x**", "yxy"}, {"é*ü", "éaü"},
		{"a*b*c", "abc" + strings.Repeat("b", 40)}, {"[*]", "[x]"}, {".*", "ab"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(name) {
			t.Skip("the regexp reference works on UTF-8 text")
		}
		if strings.Count(pattern, "*") > 64 || len(name) > 1<<12 {
			t.Skip("keep the reference fast")
		}
		if got, want := MatchPattern(pattern, name), refMatch(t, pattern, name); got != want {
			t.Errorf("MatchPattern(%q, %q) = %v, reference says %v", pattern, name, got, want)
		}
	})
}

func TestHashSecret(t *testing.T) {
	a, b := HashSecret("x"), HashSecret("x")
	if a != b || a == HashSecret("y") {
		t.Error("HashSecret is not a function of its input")
	}
	// SHA-256("abc")
	if got := HashSecret("abc"); got[0] != 0xba || got[31] != 0xad {
		t.Errorf("HashSecret(abc) = %x", got)
	}
}

func TestStateListings(t *testing.T) {
	h := newFixture(t)
	st := h.state()
	if got := len(st.Keys()); got != 2 || st.Keys()[0].Key.Id != "k1" {
		t.Errorf("Keys() = %v", st.Keys())
	}
	if st.Key("nope") != nil || st.Route("nope") != nil || st.RouteConfig("nope") != nil || st.Credential("nope") != nil {
		t.Error("lookups of missing names returned something")
	}
	if rc := st.RouteConfigs(); len(rc) != 2 || rc[0].Name != "gpt-4o" || rc[1].Name != "solo" {
		t.Errorf("RouteConfigs() = %v", rc)
	}
	if c := st.Credentials(); len(c) != 1 || c[0].Name != "openai" {
		t.Errorf("Credentials() = %v", c)
	}
	if !st.HasAdminToken(HashSecret("admin")) || st.HasAdminToken(HashSecret("other")) || st.AdminTokenCount() != 1 {
		t.Error("admin tokens wrong")
	}
	empty := emptyState()
	if len(empty.Keys()) != 0 || len(empty.RouteNames()) != 0 || len(empty.RouteConfigs()) != 0 || empty.AdminTokenCount() != 0 {
		t.Error("empty state is not empty")
	}
}

// A key's allow-list works whatever the order of exact names and
// patterns, and the view never reorders the stored list.
func TestKeyAllowsWhateverTheOrderOfItsModels(t *testing.T) {
	for _, models := range [][]string{
		{"o1", "gpt-4o", "*-mini", "claude-*"},
		{"*-mini", "o1", "claude-*", "gpt-4o"},
		{"claude-*", "*-mini", "gpt-4o", "o1"},
	} {
		stored := slices.Clone(models)
		k := mustKey(t, &pb.StoredKey{Key: &pb.Key{Id: "k", Models: stored}, SecretHash: hashOf("s")})
		for m, want := range map[string]bool{"o1": true, "gpt-4o": true, "gpt-4o-mini": true, "claude-3": true, "o1-pro": false, "gpt-4": false} {
			if k.Allows(m) != want {
				t.Errorf("models %v: Allows(%q) = %v", models, m, !want)
			}
		}
		if !slices.Equal(stored, models) {
			t.Errorf("the view reordered the stored models: %v", stored)
		}
	}
	if k := mustKey(t, &pb.StoredKey{Key: &pb.Key{Id: "k", Models: []string{"o1", "*"}}, SecretHash: hashOf("s")}); !k.Allows("anything") {
		t.Error(`"*" does not allow everything`)
	}
}
