package prices

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// at returns a fresh copy of the built-in table whose clock is stuck at ts.
func at(t testing.TB, ts string) *Table {
	t.Helper()
	now, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Load(strings.NewReader(builtinJSON))
	if err != nil {
		t.Fatal(err)
	}
	tab.now = func() time.Time { return now }
	return tab
}

func TestLookupBuiltin(t *testing.T) {
	const (
		openaiURL    = "https://api.openai.com/v1"
		anthropicURL = "https://api.anthropic.com/v1"
		geminiURL    = "https://generativelanguage.googleapis.com/v1beta/openai"
	)
	// The clock matters only for o3 (cheaper from 2025-06-10) and DeepSeek
	// (off-peak discount outside 00:30-16:30 UTC).
	tab := at(t, "2026-11-30T12:00:00Z")
	tests := []struct {
		kind, url, model string
		provider, id     string
		in, out, cached  int64
	}{
		{"openai", openaiURL, "gpt-4o", "openai", "gpt-4o", 2_500_000, 10_000_000, 1_250_000},
		{"openai", openaiURL, "gpt-4o-2024-08-06", "openai", "gpt-4o", 2_500_000, 10_000_000, 1_250_000},
		{"openai", openaiURL, "GPT-4o", "openai", "gpt-4o", 2_500_000, 10_000_000, 1_250_000},
		{"openai", "", "gpt-4o-mini", "openai", "gpt-4o-mini", 150_000, 600_000, 75_000},
		{"openai", openaiURL, "gpt-4.1", "openai", "gpt-4.1", 2_000_000, 8_000_000, 500_000},
		{"openai", openaiURL, "o3", "openai", "o3", 2_000_000, 8_000_000, 500_000},
		{"openai", openaiURL, "o4-mini", "openai", "o4-mini", 1_100_000, 4_400_000, 275_000},
		{"openai", openaiURL, "text-embedding-3-small", "openai", "text-embedding-3-small", 20_000, 0, 0},
		// openai-compatible pointed at OpenAI itself prices as OpenAI.
		{"openai-compatible", openaiURL, "gpt-4o-mini", "openai", "gpt-4o-mini", 150_000, 600_000, 75_000},

		{"anthropic", anthropicURL, "claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", 3_000_000, 15_000_000, 300_000}, // tiered: base
		{"anthropic", anthropicURL, "claude-sonnet-4-5-20250929", "anthropic", "claude-sonnet-4-5", 3_000_000, 15_000_000, 300_000},
		{"anthropic", anthropicURL, "claude-3-5-haiku-latest", "anthropic", "claude-3-5-haiku-latest", 800_000, 4_000_000, 80_000},
		{"anthropic", anthropicURL, "claude-haiku-4-5", "anthropic", "claude-haiku-4-5", 1_000_000, 5_000_000, 100_000},
		{"anthropic", anthropicURL, "claude-opus-4-1-20250805", "anthropic", "claude-opus-4-1", 15_000_000, 75_000_000, 1_500_000},
		{"anthropic", anthropicURL, "claude-opus-4-5", "anthropic", "claude-opus-4-5", 5_000_000, 25_000_000, 500_000},
		{"anthropic", anthropicURL, "claude-sonnet-5", "anthropic", "claude-sonnet-5", 3_000_000, 15_000_000, 300_000}, // from 2026-09-01

		{"gemini", geminiURL, "gemini-2.5-pro", "google", "gemini-2.5-pro", 1_250_000, 10_000_000, 125_000}, // tiered: base
		{"gemini", geminiURL, "gemini-2.5-flash", "google", "gemini-2.5-flash", 300_000, 2_500_000, 30_000},
		{"openai-compatible", geminiURL, "gemini-2.5-flash", "google", "gemini-2.5-flash", 300_000, 2_500_000, 30_000},

		{"openai-compatible", "https://api.mistral.ai/v1", "mistral-large-latest", "mistral", "mistral-large", 2_000_000, 6_000_000, 0},
		{"openai-compatible", "https://api.mistral.ai/v1", "mistral-small-2603", "mistral", "mistral-small-2603", 150_000, 600_000, 15_000},
		{"openai-compatible", "https://api.deepseek.com/v1", "deepseek-chat", "deepseek", "deepseek-chat", 270_000, 1_100_000, 70_000},
		{"openai-compatible", "https://api.deepseek.com", "deepseek-reasoner", "deepseek", "deepseek-reasoner", 550_000, 2_190_000, 140_000},
		{"openai-compatible", "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile", "groq", "llama-3.3-70b-versatile", 590_000, 790_000, 0},
		{"openai-compatible", "https://api.groq.com/openai/v1", "openai/gpt-oss-120b", "groq", "openai/gpt-oss-120b", 150_000, 600_000, 75_000},
		{"openai-compatible", "https://openrouter.ai/api/v1", "anthropic/claude-sonnet-4.5", "openrouter", "anthropic/claude-sonnet-4.5", 3_000_000, 15_000_000, 300_000},
		{"openai-compatible", "https://openrouter.ai/api/v1", "meta-llama/llama-3.3-70b-instruct:free", "openrouter", "meta-llama/llama-3.3-70b-instruct:free", 0, 0, 0},
		// Written with capitals in the data; upstream's matcher never finds it.
		{"openai-compatible", "https://api.together.xyz/v1", "meta-llama/Llama-3.3-70B-Instruct-Turbo", "together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", 880_000, 880_000, 0},
		{"openai-compatible", "https://api.fireworks.ai/inference/v1", "accounts/fireworks/models/gpt-oss-120b", "fireworks", "gpt-oss-120b", 150_000, 600_000, 70_000},
		{"openai-compatible", "https://api.x.ai/v1", "grok-4", "x-ai", "grok-4-0709", 3_000_000, 15_000_000, 750_000},
		{"openai-compatible", "https://api.x.ai/v1", "grok-4.3-20260101", "x-ai", "grok-4.3", 1_250_000, 2_500_000, 200_000}, // regex rule
		{"openai-compatible", "HTTPS://API.GROQ.COM/openai/v1", "llama-3.1-8b-instant", "groq", "llama-3.1-8b-instant", 50_000, 80_000, 0},

		// Azure: its own entries first, then OpenAI's and Anthropic's.
		{"azure-openai", "https://myres.openai.azure.com", "o4-mini", "azure", "o4-mini", 1_100_000, 4_400_000, 280_000},
		{"azure-openai", "https://myres.openai.azure.com", "gpt-4o", "azure", "gpt-4o", 2_500_000, 10_000_000, 1_250_000},
		{"openai-compatible", "https://myres.openai.azure.com/openai/v1", "gpt-4o-mini", "azure", "gpt-4o-mini", 150_000, 600_000, 75_000},
		{"bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com", "anthropic.claude-3-5-sonnet-20240620-v1:0", "aws", "", 3_000_000, 15_000_000, 300_000},
		// A kind that is a genai-prices id or provider_match.
		{"groq", "", "llama-3.1-8b-instant", "groq", "llama-3.1-8b-instant", 50_000, 80_000, 0},
		{"xai", "", "grok-3", "x-ai", "grok-3", 3_000_000, 15_000_000, 750_000},
	}
	for _, tc := range tests {
		t.Run(tc.kind+"/"+tc.model, func(t *testing.T) {
			m, ok := tab.Lookup(tc.kind, tc.url, tc.model)
			if !ok {
				t.Fatalf("Lookup(%q, %q, %q): not found", tc.kind, tc.url, tc.model)
			}
			want := pr(tc.in, tc.out, tc.cached)
			got := three(m.Price)
			if !reflect.DeepEqual(got, want) || m.Provider != tc.provider || (tc.id != "" && m.Model != tc.id) {
				t.Errorf("Lookup(%q, %q, %q) = %+v; want %+v from %s/%s", tc.kind, tc.url, tc.model, m, want, tc.provider, tc.id)
			}
			// The cached answer is the same.
			if m2, ok := tab.Lookup(tc.kind, tc.url, tc.model); !ok || !reflect.DeepEqual(m2, m) {
				t.Errorf("second Lookup = %+v, %v; want %+v", m2, ok, m)
			}
		})
	}
}

func TestLookupUnpriced(t *testing.T) {
	tab := Builtin()
	for _, tc := range []struct{ kind, url, model string }{
		{"openai", "https://api.openai.com/v1", "gpt-nonexistent-9"},
		{"openai", "https://api.openai.com/v1", ""},
		{"anthropic", "", "gpt-4o"},
		{"openai-compatible", "https://llm.example.internal/v1", "gpt-4o"},
		{"openai-compatible", "http://localhost:11434/v1", "llama3.1:8b"},
		{"openai-compatible", "", "gpt-4o"},
		{"no-such-kind", "", "gpt-4o"},
		{"openai-compatible", "https://api.groq.com/openai/v1", "gpt-4o"},
		// api_pattern is anchored at the start of the URL.
		{"openai-compatible", "https://proxy.example.com/https://api.groq.com/openai/v1", "llama-3.3-70b-versatile"},
	} {
		for range 2 { // miss, then cached miss
			if m, ok := tab.Lookup(tc.kind, tc.url, tc.model); ok {
				t.Errorf("Lookup(%q, %q, %q) = %+v; want not found", tc.kind, tc.url, tc.model, m)
			}
		}
	}
}

func TestLookupDemoIsFree(t *testing.T) {
	m, ok := Builtin().Lookup("demo", "", "demo")
	if !ok || !reflect.DeepEqual(m, Match{Provider: DemoProvider, Model: "demo"}) {
		t.Fatalf("demo = %+v, %v; want free", m, ok)
	}
	if c := m.Price.Cost(Tokens{Prompt: 1000, Completion: 1000}); c != 0 {
		t.Fatalf("demo cost %d", c)
	}
}

func TestConditionalPricesFollowTheClock(t *testing.T) {
	cases := []struct {
		now, kind, url, model string
		want                  Price
	}{
		// claude-sonnet-5: $2/$10 until 2026-09-01, $3/$15 from then (UTC).
		{"2026-08-31T23:59:59Z", "anthropic", "", "claude-sonnet-5", pr(2_000_000, 10_000_000, 200_000)},
		{"2026-09-01T00:00:00Z", "anthropic", "", "claude-sonnet-5", pr(3_000_000, 15_000_000, 300_000)},
		// The conditional entry is also resolved for Bedrock's copy.
		{"2026-08-01T00:00:00Z", "bedrock", "", "global.anthropic.claude-sonnet-5-v1:0", pr(2_000_000, 10_000_000, 200_000)},
		// o3 price cut of 2025-06-10.
		{"2025-06-09T12:00:00Z", "openai", "", "o3", pr(10_000_000, 40_000_000, 500_000)},
		{"2025-06-10T00:00:00Z", "openai", "", "o3", pr(2_000_000, 8_000_000, 500_000)},
		// DeepSeek: standard 00:30-16:30 UTC, half price otherwise.
		{"2026-11-30T00:29:59Z", "openai-compatible", "https://api.deepseek.com", "deepseek-chat", pr(135_000, 550_000, 35_000)},
		{"2026-11-30T00:30:00Z", "openai-compatible", "https://api.deepseek.com", "deepseek-chat", pr(270_000, 1_100_000, 70_000)},
		{"2026-11-30T16:29:59Z", "openai-compatible", "https://api.deepseek.com", "deepseek-chat", pr(270_000, 1_100_000, 70_000)},
		{"2026-11-30T16:30:00Z", "openai-compatible", "https://api.deepseek.com", "deepseek-chat", pr(135_000, 550_000, 35_000)},
		{"2026-11-30T08:00:00+08:00", "openai-compatible", "https://api.deepseek.com", "deepseek-chat", pr(135_000, 550_000, 35_000)}, // 00:00 UTC
	}
	for _, tc := range cases {
		tab := at(t, tc.now)
		m, ok := tab.Lookup(tc.kind, tc.url, tc.model)
		if !ok || !reflect.DeepEqual(three(m.Price), tc.want) {
			t.Errorf("at %s %s = %+v, %v; want %+v", tc.now, tc.model, m.Price, ok, tc.want)
		}
	}

	// A cached entry still follows the clock.
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tab := at(t, "2026-11-30T12:00:00Z")
	tab.now = func() time.Time { return now }
	a, _ := tab.Lookup("openai-compatible", "https://api.deepseek.com", "deepseek-chat")
	now = now.Add(6 * time.Hour)
	b, _ := tab.Lookup("openai-compatible", "https://api.deepseek.com", "deepseek-chat")
	if a.Price.InputMicros != 270_000 || b.Price.InputMicros != 135_000 {
		t.Errorf("cached conditional price did not follow the clock: %d then %d", a.Price.InputMicros, b.Price.InputMicros)
	}
}

// TestBuiltinData walks the raw embedded file independently of Load and
// checks it against the compiled table: every provider and model loaded, in
// order; every regex compiles; every price that is kept converts to whole
// micro-dollars; every equals rule is found by Lookup.
func TestBuiltinData(t *testing.T) {
	tab := Builtin()
	var raw []map[string]any
	if err := json.Unmarshal([]byte(builtinJSON), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 34 || len(tab.providers) != len(raw) {
		t.Fatalf("%d providers in the file, %d loaded; want 34", len(raw), len(tab.providers))
	}
	var nModels, nRegex, nEquals, shadowed int
	for i, rp := range raw {
		p := tab.providers[i]
		if p.id != rp["id"] {
			t.Fatalf("provider %d: %q loaded as %q", i, rp["id"], p.id)
		}
		if _, err := regexp.Compile(rp["api_pattern"].(string)); err != nil {
			t.Errorf("%s api_pattern: %v", p.id, err)
		}
		for _, k := range []string{"model_match", "provider_match"} {
			if c, ok := rp[k]; ok {
				nRegex += checkRegexes(t, p.id+" "+k, c)
			}
		}
		models := rp["models"].([]any)
		if len(models) != len(p.models) {
			t.Fatalf("%s: %d models in the file, %d loaded", p.id, len(models), len(p.models))
		}
		for j, rmAny := range models {
			rm := rmAny.(map[string]any)
			where := fmt.Sprintf("%s/%s", p.id, rm["id"])
			if p.models[j].id != rm["id"] {
				t.Fatalf("%s loaded as %q", where, p.models[j].id)
			}
			nModels++
			nRegex += checkRegexes(t, where, rm["match"])
			checkPrices(t, where, rm["prices"])
			for _, lit := range equalsLiterals(rm["match"]) {
				nEquals++
				m, ok := tab.Lookup(p.id, "", lit)
				if !ok {
					t.Errorf("%s: Lookup(%q) not found", where, lit)
				} else if m.Model != rm["id"] {
					shadowed++
				}
			}
		}
	}
	if nModels != 1442 || tab.models != nModels {
		t.Errorf("%d models in the file, %d loaded; want 1442", nModels, tab.models)
	}
	t.Logf("%d providers, %d models, %d regexes, %d equals rules (%d answered by an earlier model)",
		len(raw), nModels, nRegex, nEquals, shadowed)
}

func checkRegexes(t *testing.T, where string, c any) int {
	n := 0
	for k, v := range c.(map[string]any) {
		switch k {
		case "regex":
			n++
			if _, err := regexp.Compile(v.(string)); err != nil {
				t.Errorf("%s: regex %q: %v", where, v, err)
			}
		case "or", "and":
			for _, sub := range v.([]any) {
				n += checkRegexes(t, where, sub)
			}
		}
	}
	return n
}

func equalsLiterals(c any) []string {
	var out []string
	for k, v := range c.(map[string]any) {
		switch k {
		case "equals":
			out = append(out, v.(string))
		case "or":
			for _, sub := range v.([]any) {
				out = append(out, equalsLiterals(sub)...)
			}
		}
	}
	return out
}

// checkPrices checks that the kept prices are whole micro-dollars, so that
// rounding to micro-dollars loses nothing.
func checkPrices(t *testing.T, where string, prices any) {
	var sets []map[string]any
	switch ps := prices.(type) {
	case map[string]any:
		sets = append(sets, ps)
	case []any:
		for _, e := range ps {
			sets = append(sets, e.(map[string]any)["prices"].(map[string]any))
		}
	default:
		t.Fatalf("%s: prices of type %T", where, prices)
	}
	for _, set := range sets {
		for _, k := range []string{"input_mtok", "output_mtok", "cache_read_mtok"} {
			var vals []float64
			switch v := set[k].(type) {
			case nil:
			case float64:
				vals = append(vals, v)
			case map[string]any:
				vals = append(vals, v["base"].(float64))
				for _, tier := range v["tiers"].([]any) {
					vals = append(vals, tier.(map[string]any)["price"].(float64))
				}
			default:
				t.Errorf("%s %s: %T", where, k, v)
			}
			for _, v := range vals {
				if u := v * 1e6; v < 0 || math.Abs(u-math.Round(u)) > 1e-6 {
					t.Errorf("%s %s: %v is not a whole number of micro-dollars", where, k, v)
				}
			}
		}
	}
}

func TestLoadCustomTable(t *testing.T) {
	const js = `[
	  {"id": "acme", "name": "Acme", "api_pattern": "https://api\\.acme\\.test",
	   "provider_match": {"contains": "acme"},
	   "fallback_model_providers": ["base", "nowhere"],
	   "models": [
	     {"id": "Acme-Large", "match": {"or": [{"equals": "Acme-Large"}, {"regex": "^acme-large-\\d{4}$"}]},
	      "prices": {"input_mtok": 1.5, "output_mtok": {"base": 6, "tiers": [{"start": 100000, "price": 12}]},
	                 "cache_read_mtok": 0.15, "cache_write_mtok": 1.875, "requests_kcount": 5, "some_future_mtok": 9}},
	     {"id": "acme-small", "match": {"and": [{"starts_with": "acme-"}, {"ends_with": "-small"}]},
	      "prices": [
	        {"prices": {"input_mtok": 0.1, "output_mtok": 0.2}},
	        {"constraint": {"start_time": "22:00:00Z", "end_time": "06:00:00Z"}, "prices": {"input_mtok": 0.05, "output_mtok": 0.1}},
	        {"when": {"service_tier": "flex"}, "prices": {"input_mtok": 0.01, "output_mtok": 0.01}}
	      ]},
	     {"id": "acme-nightly", "match": {"contains": "nightly"}, "prices": []}
	   ]},
	  {"id": "base", "name": "Base", "api_pattern": "https://base\\.test", "models": [
	     {"id": "shared", "match": {"equals": "shared-model"}, "prices": {"input_mtok": 0.000001, "output_mtok": 0.0000004}}
	  ]}
	]`
	_, err := Load(strings.NewReader(js))
	if err == nil || !strings.Contains(err.Error(), "acme-nightly") {
		t.Fatalf("empty conditional list: err = %v", err)
	}
	tab, err := Load(strings.NewReader(strings.Replace(js, `"prices": []`, `"prices": {}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	noon := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := noon
	tab.now = func() time.Time { return now }
	check := func(kind, url, model string, want Match, wantOK bool) {
		t.Helper()
		got, ok := tab.Lookup(kind, url, model)
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("Lookup(%q, %q, %q) = %+v, %v; want %+v, %v", kind, url, model, got, ok, want, wantOK)
		}
	}
	// The output price is tiered: a prompt of more than 100,000 tokens pays
	// $12 per million output tokens; the other rates stay.
	large := Match{Price{InputMicros: 1_500_000, OutputMicros: 6_000_000, CachedInputMicros: 150_000, CacheWriteMicros: 1_875_000,
		Tiers: []Tier{{Above: 100_000, InputMicros: 1_500_000, OutputMicros: 12_000_000, CachedInputMicros: 150_000, CacheWriteMicros: 1_875_000}}},
		"acme", "Acme-Large"}
	check("acme", "", "acme-large", large, true)
	check("openai-compatible", "https://api.acme.test/v1", "ACME-LARGE", large, true)
	check("acme-cloud", "", "acme-large-2026", large, true) // kind via provider_match
	check("acme", "", "acme-large-26", Match{}, false)
	check("acme", "", "acme-small", Match{pr(100_000, 200_000, 0), "acme", "acme-small"}, true)
	now = noon.Add(11 * time.Hour) // 23:00, inside the window that wraps midnight
	check("acme", "", "acme-small", Match{pr(50_000, 100_000, 0), "acme", "acme-small"}, true)
	// A reservation assumes the dearest price whatever the time: 1000 prompt
	// and 1000 completion tokens at the day price are 300,000 nano-dollars.
	if c, ok := tab.MaxCost("acme", "", "acme-small", 1000, 1000); !ok || c != 300_000 {
		t.Errorf("MaxCost(acme-small) at 23:00 = %d, %v; want the day price's 300000", c, ok)
	}
	// Every prompt token at the dearest input rate, the cache write's
	// $1.875: (1000 × 1,875,000 + 1000 × 6,000,000) / 1000.
	if c, ok := tab.MaxCost("acme", "", "acme-large", 1000, 1000); !ok || c != 7_875_000 {
		t.Errorf("MaxCost(acme-large) = %d, %v; want 7875000", c, ok)
	}
	// A prompt that may pass 100,000 tokens is bounded at the tier's output rate.
	if c, ok := tab.MaxCost("acme", "", "acme-large", 100_001, 1000); !ok || c != (100_001*1_875_000+1000*12_000_000)/1000 {
		t.Errorf("MaxCost(acme-large, long prompt) = %d, %v", c, ok)
	}
	if _, ok := tab.MaxCost("acme", "", "nope", 1, 1); ok {
		t.Error("MaxCost priced an unknown model")
	}
	now = noon
	check("acme", "", "nightly", Match{Price{}, "acme", "acme-nightly"}, true) // listed without prices: free
	// Fallback to base; sub-micro prices round to the nearest micro-dollar.
	check("acme", "", "shared-model", Match{pr(1, 0, 0), "acme", "shared"}, true)
	check("openai-compatible", "https://base.test", "shared-model", Match{pr(1, 0, 0), "base", "shared"}, true)
	// No second level of fallback and no way back.
	check("base", "", "acme-large", Match{}, false)
	// The built-in table is untouched.
	check("openai", "", "gpt-4o", Match{}, false)
}

func TestLoadRejectsBrokenTables(t *testing.T) {
	ok := func(models string) string {
		return `[{"id": "p", "api_pattern": "https://p\\.test", "models": [` + models + `]}]`
	}
	for name, js := range map[string]string{
		"garbage":              "this is not json",
		"truncated":            builtinJSON[:len(builtinJSON)/2],
		"object":               `{"providers": []}`,
		"null":                 `null`,
		"empty":                `[]`,
		"trailing":             ok(``) + ` []`,
		"no api_pattern":       `[{"id": "p", "models": []}]`,
		"empty api_pattern":    `[{"id": "p", "api_pattern": "", "models": []}]`,
		"bad api_pattern":      `[{"id": "p", "api_pattern": "(", "models": []}]`,
		"no id":                `[{"api_pattern": "x", "models": []}]`,
		"no models":            `[{"id": "p", "api_pattern": "x"}]`,
		"duplicate provider":   ok(``)[:len(ok(``))-1] + `,` + ok(``)[1:],
		"bad provider_match":   `[{"id": "p", "api_pattern": "x", "provider_match": {"regex": "("}, "models": []}]`,
		"bad model_match":      `[{"id": "p", "api_pattern": "x", "model_match": {"like": "a"}, "models": []}]`,
		"bad regex":            ok(`{"id": "m", "match": {"regex": "(?<=a)b"}, "prices": {}}`),
		"unknown clause":       ok(`{"id": "m", "match": {"glob": "a*"}, "prices": {}}`),
		"two keys":             ok(`{"id": "m", "match": {"equals": "a", "contains": "b"}, "prices": {}}`),
		"empty and":            ok(`{"id": "m", "match": {"and": []}, "prices": {}}`),
		"empty literal":        ok(`{"id": "m", "match": {"contains": ""}, "prices": {}}`),
		"literal not string":   ok(`{"id": "m", "match": {"equals": 3}, "prices": {}}`),
		"no match":             ok(`{"id": "m", "prices": {}}`),
		"no prices":            ok(`{"id": "m", "match": {"equals": "m"}}`),
		"model without id":     ok(`{"match": {"equals": "m"}, "prices": {}}`),
		"negative price":       ok(`{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": -1}}`),
		"huge price":           ok(`{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": 1e300}}`),
		"string price":         ok(`{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": "1.5"}}`),
		"tier without base":    ok(`{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": {"tiers": []}}}`),
		"tier unknown field":   ok(`{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": {"base": 1, "tiers": [], "cap": 2}}}`),
		"negative tier":        ok(`{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": {"base": 1, "tiers": [{"start": 5, "price": -2}]}}}`),
		"bad start_date":       ok(`{"id": "m", "match": {"equals": "m"}, "prices": [{"constraint": {"start_date": "next week"}, "prices": {}}]}`),
		"bad start_time":       ok(`{"id": "m", "match": {"equals": "m"}, "prices": [{"constraint": {"start_time": "noon", "end_time": "13:00:00Z"}, "prices": {}}]}`),
		"entry without price":  ok(`{"id": "m", "match": {"equals": "m"}, "prices": [{"constraint": {"start_date": "2025-01-01"}}]}`),
		"only unknown entries": ok(`{"id": "m", "match": {"equals": "m"}, "prices": [{"when": {"batch": true}, "prices": {}}]}`),
	} {
		tab, err := Load(strings.NewReader(js))
		if err == nil {
			t.Errorf("%s: Load succeeded (%d providers)", name, len(tab.providers))
			continue
		}
		t.Logf("%s: %v", name, err)
	}
}

func TestCost(t *testing.T) {
	gpt4oMini := Price{InputMicros: 150_000, OutputMicros: 600_000, CachedInputMicros: 75_000}
	for _, tc := range []struct {
		name                      string
		p                         Price
		prompt, completion, cache int64
		want                      int64
	}{
		{"zero usage", gpt4oMini, 0, 0, 0, 0},
		{"zero price", Price{}, 1_000_000, 1_000_000, 0, 0},
		// 1M prompt + 1M completion = $0.15 + $0.60 = 750_000_000 nano-dollars.
		{"one million each", gpt4oMini, 1_000_000, 1_000_000, 0, 750_000_000},
		// 1000 prompt of which 400 cached, 500 out:
		// (600*150000 + 400*75000 + 500*600000) / 1000 = 90000+30000+300000 = 420000.
		{"cached", gpt4oMini, 1000, 500, 400, 420_000},
		{"all cached", gpt4oMini, 1000, 0, 1000, 75_000},
		{"cached price 0 means input", Price{InputMicros: 150_000, OutputMicros: 600_000}, 1000, 0, 400, 150_000},
		{"cached beyond prompt is clamped", gpt4oMini, 1000, 0, 5000, 75_000},
		{"negative cached counts as 0", gpt4oMini, 1000, 0, -5, 150_000},
		{"negative tokens count as 0", gpt4oMini, -1000, -1, -1, 0},
		{"negative price counts as 0", Price{InputMicros: -5, OutputMicros: 2000}, 1000, 1, 0, 2},
		// 1 token at 150000 micro/Mtok = 150 nano; 1 token at 1 micro/Mtok = 0.001 nano.
		{"one token", gpt4oMini, 1, 0, 0, 150},
		{"rounds down below half", Price{InputMicros: 1}, 499, 0, 0, 0},
		{"rounds half up", Price{InputMicros: 1}, 500, 0, 0, 1},
		{"rounds up above half", Price{InputMicros: 1}, 1499, 0, 0, 1},
		{"1500 is 1.5", Price{InputMicros: 1}, 1500, 0, 0, 2},
		{"0.0028 usd per Mtok", Price{InputMicros: 2800}, 1_000_000, 0, 0, 2_800_000},
		// 1e12 tokens at $15/Mtok = $15M = 1.5e16 nano: big but exact.
		{"large exact", Price{InputMicros: 15_000_000}, 1_000_000_000_000, 0, 0, 15_000_000_000_000_000},
		{"saturates", Price{InputMicros: math.MaxInt64, OutputMicros: math.MaxInt64, CachedInputMicros: math.MaxInt64}, math.MaxInt64, math.MaxInt64, 0, math.MaxInt64},
		{"saturates just over", Price{InputMicros: 1000}, math.MaxInt64, 0, 0, math.MaxInt64},
		{"just under saturation", Price{InputMicros: 1000}, math.MaxInt64 / 1000 * 1000, 0, 0, math.MaxInt64 / 1000 * 1000},
		{"sum overflows 64 bits, quotient fits", Price{InputMicros: 2, OutputMicros: 2}, math.MaxInt64 / 2, math.MaxInt64 / 2, 0, (math.MaxInt64/2*4 + 500) / 1000},
	} {
		if got := tc.p.Cost(Tokens{Prompt: tc.prompt, Completion: tc.completion, Cached: tc.cache}); got != tc.want {
			t.Errorf("%s: Cost(%d, %d, %d) = %d; want %d", tc.name, tc.prompt, tc.completion, tc.cache, got, tc.want)
		}
	}
}

func TestLookupConcurrent(t *testing.T) {
	tab := at(t, "2026-11-30T12:00:00Z")
	models := []string{"gpt-4o", "gpt-4o-mini", "o3", "nope", "text-embedding-3-small"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				name := models[(g+i)%len(models)]
				m, ok := tab.Lookup("openai", "https://api.openai.com/v1", name)
				if ok != (name != "nope") || (ok && m.Provider != "openai") {
					t.Errorf("Lookup(%q) = %+v, %v", name, m, ok)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCacheIsBounded(t *testing.T) {
	tab := at(t, "2026-11-30T12:00:00Z")
	for i := range maxCached + 100 {
		tab.Lookup("openai", "", fmt.Sprintf("unknown-%d", i))
	}
	if n := tab.cached.Load(); n != maxCached {
		t.Fatalf("%d cached entries; want the cap %d", n, maxCached)
	}
	// Lookups past the cap still answer.
	if m, ok := tab.Lookup("openai", "", "gpt-4o"); !ok || m.Price.InputMicros != 2_500_000 {
		t.Fatalf("uncached lookup = %+v, %v", m, ok)
	}
}

func TestLookupCachedDoesNotAllocate(t *testing.T) {
	tab := Builtin()
	for _, model := range []string{"gpt-4o-mini", "o3", "gpt-nonexistent"} {
		tab.Lookup("openai", "https://api.openai.com/v1", model)
		if n := testing.AllocsPerRun(100, func() {
			tab.Lookup("openai", "https://api.openai.com/v1", model)
		}); n != 0 {
			t.Errorf("cached Lookup of %q: %v allocations", model, n)
		}
	}
}

func BenchmarkLookupCached(b *testing.B) {
	tab := Builtin()
	tab.Lookup("openai-compatible", "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := tab.Lookup("openai-compatible", "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile"); !ok {
			b.Fatal("not found")
		}
	}
}

// BenchmarkLookupMiss measures the uncached work of Lookup: the provider by
// URL, then a walk of its rules. OpenRouter's 690 models are the longest
// list; its last model is the worst case that still finds a price.
func BenchmarkLookupMiss(b *testing.B) {
	tab := Builtin()
	for _, model := range []string{"~openai/gpt-mini-latest", "openai/gpt-4o", "no-such-model"} {
		b.Run(model, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e := tab.resolve("openai-compatible", "https://openrouter.ai/api/v1", model)
				if (e.m != nil) != (model != "no-such-model") {
					b.Fatal("unexpected result")
				}
			}
		})
	}
}

// pr is a Price of three rates, for tables.
func pr(in, out, cached int64) Price {
	return Price{InputMicros: in, OutputMicros: out, CachedInputMicros: cached}
}

// three is p's base input, output and cache-read rates.
func three(p Price) Price { return pr(p.InputMicros, p.OutputMicros, p.CachedInputMicros) }

// Cache writes and long-context tiers, as Anthropic bills them: Claude
// Sonnet 4.5 is $3/$15 with cache writes at $3.75 and reads at $0.30, and
// every rate doubles (output ×1.5) once the prompt passes 200,000 tokens.
func TestCostCacheWritesAndTiers(t *testing.T) {
	m, ok := Builtin().Lookup("anthropic", "", "claude-sonnet-4-5-20250929")
	if !ok {
		t.Fatal("claude-sonnet-4-5 not found")
	}
	sonnet := Price{InputMicros: 3_000_000, OutputMicros: 15_000_000, CachedInputMicros: 300_000, CacheWriteMicros: 3_750_000,
		Tiers: []Tier{{Above: 200_000, InputMicros: 6_000_000, OutputMicros: 22_500_000, CachedInputMicros: 600_000, CacheWriteMicros: 7_500_000}}}
	if !reflect.DeepEqual(m.Price, sonnet) {
		t.Fatalf("claude-sonnet-4-5 = %+v;\nwant %+v", m.Price, sonnet)
	}
	for _, tc := range []struct {
		name string
		p    Price
		tok  Tokens
		want int64
	}{
		// 10,000 prompt tokens: 1,000 plain, 2,000 read, 7,000 written; 500 out.
		// (1000×3e6 + 2000×3e5 + 7000×3.75e6 + 500×15e6) / 1000.
		{"cache writes at their rate", sonnet, Tokens{Prompt: 10_000, Completion: 500, Cached: 2000, CacheWrite: 7000}, 37_350_000},
		{"writes without a rate cost input", pr(3_000_000, 0, 0), Tokens{Prompt: 1000, CacheWrite: 1000}, 3_000_000},
		{"writes beyond the uncached prompt are clamped", sonnet, Tokens{Prompt: 1000, Cached: 600, CacheWrite: 900}, (600*300_000 + 400*3_750_000) / 1000},
		{"negative writes count as 0", sonnet, Tokens{Prompt: 1000, CacheWrite: -7}, 3_000_000},
		// Exactly 200,000 is the base tier; one more is the long-context tier for all tokens.
		{"at the threshold", sonnet, Tokens{Prompt: 200_000, Completion: 1000}, 600_000_000 + 15_000_000},
		{"past the threshold", sonnet, Tokens{Prompt: 200_001, Completion: 1000}, (200_001*6_000_000)/1000 + 22_500_000},
		// The tier is chosen by the whole prompt, cached and written tokens included.
		{"cache reads count toward the tier", sonnet, Tokens{Prompt: 250_000, Cached: 240_000, CacheWrite: 5000}, (5000*6_000_000 + 240_000*600_000 + 5000*7_500_000) / 1000},
		{"tiers ascending, last reached wins", Price{InputMicros: 1000, Tiers: []Tier{{Above: 10, InputMicros: 2000}, {Above: 20, InputMicros: 4000}}}, Tokens{Prompt: 1000}, 4000},
		{"between tiers", Price{InputMicros: 1000, Tiers: []Tier{{Above: 10, InputMicros: 2000}, {Above: 2000, InputMicros: 4000}}}, Tokens{Prompt: 1000}, 2000},
	} {
		if got := tc.p.Cost(tc.tok); got != tc.want {
			t.Errorf("%s: Cost(%+v) = %d; want %d", tc.name, tc.tok, got, tc.want)
		}
		// MaxCost bounds Cost for any split of the same prompt.
		if b := tc.p.MaxCost(tc.tok.Prompt, tc.tok.Completion); b < tc.p.Cost(tc.tok) {
			t.Errorf("%s: MaxCost %d below Cost %d", tc.name, b, tc.p.Cost(tc.tok))
		}
	}
	// A reservation for a prompt that may pass the threshold assumes the
	// long-context rates, and the cache write's input rate.
	if got, want := sonnet.MaxCost(300_000, 1000), int64(300_000*7_500_000+1000*22_500_000)/1000; got != want {
		t.Errorf("MaxCost(300000, 1000) = %d; want %d", got, want)
	}
	// Tiers that fall, not rise, are still bounded by the dearest.
	falling := Price{InputMicros: 5000, OutputMicros: 5000, Tiers: []Tier{{Above: 10, InputMicros: 1000, OutputMicros: 1000}}}
	if got := falling.MaxCost(100, 100); got != 1000 {
		t.Errorf("falling tiers: MaxCost = %d; want 1000", got)
	}
}

// Components tiered at different thresholds make one tier per threshold,
// each component at its own rate for that prompt length.
func TestLoadTiersOfDifferentStarts(t *testing.T) {
	tab, err := Load(strings.NewReader(`[{"id": "p", "api_pattern": "https://p\\.test", "models": [
	  {"id": "m", "match": {"equals": "m"}, "prices": {
	    "input_mtok": {"base": 1, "tiers": [{"start": 300, "price": 3}, {"start": 100, "price": 2}]},
	    "output_mtok": {"base": 10, "tiers": [{"start": 200, "price": 20}]},
	    "cache_read_mtok": 0.5}}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := tab.Lookup("p", "", "m")
	want := Price{InputMicros: 1_000_000, OutputMicros: 10_000_000, CachedInputMicros: 500_000, Tiers: []Tier{
		{Above: 100, InputMicros: 2_000_000, OutputMicros: 10_000_000, CachedInputMicros: 500_000},
		{Above: 200, InputMicros: 2_000_000, OutputMicros: 20_000_000, CachedInputMicros: 500_000},
		{Above: 300, InputMicros: 3_000_000, OutputMicros: 20_000_000, CachedInputMicros: 500_000},
	}}
	if !reflect.DeepEqual(m.Price, want) {
		t.Errorf("price = %+v;\nwant %+v", m.Price, want)
	}
	for _, bad := range []string{
		`{"base": 1, "tiers": [{"start": -1, "price": 2}]}`,
		`{"base": 1, "tiers": [{"price": 2}]}`,
		`{"base": 1, "tiers": [{"start": 5}]}`,
	} {
		_, err := Load(strings.NewReader(`[{"id": "p", "api_pattern": "x", "models": [{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": ` + bad + `}}]}]`))
		if err == nil {
			t.Errorf("loaded a tier %s", bad)
		}
	}
}
