// Package prices knows what model calls cost.
//
// The built-in table is the price list published by pydantic/genai-prices
// (MIT licence, data/LICENSE; see the repository's NOTICE for the commit),
// embedded as data/genai-prices-data.json. Load reads a table in the same
// format, so an operator can use a newer list without a rebuild.
//
// Money is integer. A Price holds micro-dollars (1e-6 USD) per million
// tokens; Price.Cost returns nano-dollars (1e-9 USD).
//
// How the genai-prices data is read:
//
//   - A model name is matched lower-cased, and the string clauses of the
//     match rules (equals, starts_with, ends_with, contains) compare without
//     regard to case; regex clauses are compiled case-insensitive. (Upstream
//     lower-cases the name but not the clauses, so 84 entries of the
//     built-in table whose rules all have capitals, such as Together's
//     "meta-llama/Llama-3.3-70B-Instruct-Turbo", never match there.)
//   - The provider comes from the deployment (its kind, else its base URL
//     against api_pattern), never from the model name: a provider's
//     model_match is checked at load but not applied. It is upstream's guess
//     of a provider from a bare model name, not a filter (OpenAI's rejects
//     its own text-embedding-3-small), and guessing would price a
//     self-hosted or unknown endpoint as the vendor's API.
//   - The first model of the provider whose rule matches wins, as upstream;
//     failing that, each of the provider's fallback_model_providers is tried
//     (one level), e.g. azure falls back to openai and anthropic.
//   - Tiered prices (a higher rate once a prompt passes a token threshold)
//     become Price.Tiers. As upstream, the tier is chosen by the whole
//     prompt (cached and cache-written tokens included) and its rate applies
//     to all the call's tokens of that kind, not only those past the
//     threshold.
//   - A list of conditional prices is resolved when Lookup runs, as
//     upstream does: the last entry whose constraint holds now (a start_date
//     reached, or a UTC time-of-day window such as DeepSeek's) wins, and
//     the first entry applies when none does. An entry carrying conditions
//     this package does not know (from a newer format) is never chosen.
//   - input_mtok, output_mtok, cache_read_mtok and cache_write_mtok are
//     used. Audio and per-request fees are not part of Price.
//   - A model listed with no prices at all (OpenRouter's ":free" models,
//     OpenAI's moderation endpoint) is known and free: Price{} with ok=true.
package prices

import (
	_ "embed"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Price is what a model costs, in micro-dollars (1e-6 USD) per million
// tokens: $0.15 per million input tokens is InputMicros 150000.
type Price struct {
	// InputMicros prices prompt tokens neither read from nor written to the
	// provider's prompt cache.
	InputMicros int64
	// OutputMicros prices completion tokens (reasoning tokens included).
	OutputMicros int64
	// CachedInputMicros prices prompt tokens read from the provider's
	// prompt cache; 0 means they cost InputMicros.
	CachedInputMicros int64
	// CacheWriteMicros prices prompt tokens written to the provider's
	// prompt cache (Anthropic's cache_creation_input_tokens, Bedrock's
	// cacheWriteInputTokens), which cost more than plain input there; 0
	// means they cost InputMicros.
	CacheWriteMicros int64
	// Tiers are the rates of long prompts, ascending by Above: a call whose
	// prompt has more than Above tokens (cached and cache-written ones
	// included) pays all its tokens at the last such tier's rates, as
	// Anthropic's and Google's long-context prices do.
	Tiers []Tier
}

// Tier is a Price's rates for prompts of more than Above tokens. A zero
// cache rate means the tier's InputMicros, as in Price.
type Tier struct {
	Above                                                          int64
	InputMicros, OutputMicros, CachedInputMicros, CacheWriteMicros int64
}

// Tokens is a call's usage as Cost prices it. Prompt counts every prompt
// token, Cached (read from the prompt cache) and CacheWrite (written to
// it) included, as OpenAI's prompt_tokens does.
type Tokens struct {
	Prompt, Completion, Cached, CacheWrite int64
}

// rates is one set of per-token prices with the zero cache rates resolved.
type rates struct{ in, out, cachedIn, cacheWrite int64 }

func ratesOf(in, out, cachedIn, cacheWrite int64) rates {
	r := rates{in: max(in, 0), out: max(out, 0), cachedIn: max(cachedIn, 0), cacheWrite: max(cacheWrite, 0)}
	if r.cachedIn == 0 {
		r.cachedIn = r.in
	}
	if r.cacheWrite == 0 {
		r.cacheWrite = r.in
	}
	return r
}

// baseRates are p's rates below its first tier.
func (p *Price) baseRates() rates {
	return ratesOf(p.InputMicros, p.OutputMicros, p.CachedInputMicros, p.CacheWriteMicros)
}

// rates are the tier's rates.
func (t *Tier) rates() rates {
	return ratesOf(t.InputMicros, t.OutputMicros, t.CachedInputMicros, t.CacheWriteMicros)
}

// ratesFor returns the rates of a call with prompt tokens.
func (p *Price) ratesFor(prompt int64) rates {
	for i := len(p.Tiers) - 1; i >= 0; i-- {
		if t := &p.Tiers[i]; prompt > t.Above {
			return t.rates()
		}
	}
	return p.baseRates()
}

// Cost returns the cost in nano-dollars (1e-9 USD) of a call with usage t,
// at the rates of the tier its prompt falls in. It computes
//
//	((prompt-cached-written)*in + cached*cachedIn + written*cacheWrite + completion*out) / 1000
//
// exactly and rounds half up. Negative counts and prices count as zero,
// cached is clamped to [0, prompt] and written to [0, prompt-cached], and
// a result beyond int64 saturates at math.MaxInt64. The result is never
// negative.
func (p *Price) Cost(t Tokens) int64 {
	prompt := max(t.Prompt, 0)
	cached := min(max(t.Cached, 0), prompt)
	written := min(max(t.CacheWrite, 0), prompt-cached)
	r := p.ratesFor(prompt)
	var hi, lo uint64
	hi, lo = mulAdd(hi, lo, uint64(prompt-cached-written), uint64(r.in))
	hi, lo = mulAdd(hi, lo, uint64(cached), uint64(r.cachedIn))
	hi, lo = mulAdd(hi, lo, uint64(written), uint64(r.cacheWrite))
	hi, lo = mulAdd(hi, lo, uint64(max(t.Completion, 0)), uint64(r.out))
	return thousandths(hi, lo)
}

// MaxCost bounds the cost of a call with at most prompt prompt tokens and
// completion completion tokens, however they turn out to be split between
// plain, cached and cache-written input: every prompt token at the
// dearest input rate of every tier the prompt can reach.
func (p *Price) MaxCost(prompt, completion int64) int64 {
	prompt, completion = max(prompt, 0), max(completion, 0)
	most := maxCostAt(p.baseRates(), prompt, completion)
	for i := range p.Tiers {
		if t := &p.Tiers[i]; prompt > t.Above {
			most = max(most, maxCostAt(t.rates(), prompt, completion))
		}
	}
	return most
}

func maxCostAt(r rates, prompt, completion int64) int64 {
	var hi, lo uint64
	hi, lo = mulAdd(hi, lo, uint64(prompt), uint64(max(r.in, r.cachedIn, r.cacheWrite)))
	hi, lo = mulAdd(hi, lo, uint64(completion), uint64(r.out))
	return thousandths(hi, lo)
}

// thousandths returns the 128-bit sum hi:lo of count × micros-per-million
// products in nano-dollars: sum / 1000, rounded half up, saturating at
// math.MaxInt64. Each product is below 2^126, so a sum of four and the
// rounding term fit in 128 bits.
func thousandths(hi, lo uint64) int64 {
	var carry uint64
	lo, carry = bits.Add64(lo, 500, 0)
	hi += carry
	if hi >= 1000 { // the quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, 1000)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// mulAdd returns (hi:lo) + a*b as a 128-bit number.
func mulAdd(hi, lo, a, b uint64) (uint64, uint64) {
	ph, pl := bits.Mul64(a, b)
	var carry uint64
	lo, carry = bits.Add64(lo, pl, 0)
	hi, _ = bits.Add64(hi, ph, carry)
	return hi, lo
}

// Match is the result of a Lookup.
type Match struct {
	Price Price
	// Provider is the genai-prices id of the provider the deployment was
	// recognised as ("openai", "groq", "azure", ...), or "tollgate" for the
	// demo provider. For a model priced through a fallback provider (an
	// OpenAI model on Azure) it stays the deployment's provider.
	Provider string
	// Model is the genai-prices id of the model entry that matched; for the
	// demo provider, the model name asked for.
	Model string
}

// DemoProvider is the Provider of a Match for the "demo" provider kind,
// whose calls are free.
const DemoProvider = "tollgate"

// kindProviders maps Tollgate provider kinds to genai-prices provider ids
// where the kind names the vendor.
var kindProviders = map[string]string{
	"openai":       "openai",
	"anthropic":    "anthropic",
	"gemini":       "google",
	"bedrock":      "aws",
	"azure-openai": "azure",
}

// genericKinds are provider kinds that say nothing about who serves the
// API: only the base URL identifies the provider.
var genericKinds = map[string]bool{
	"":                  true,
	"openai-compatible": true,
}

// maxCached bounds the lookup cache; lookups beyond it are still answered,
// just not remembered.
const maxCached = 1 << 14

// Table is a parsed price list. It is safe for concurrent use.
type Table struct {
	providers []*provider
	byID      map[string]*provider
	models    int // model entries, for tests and diagnostics

	cache  sync.Map // cacheKey -> *entry
	cached atomic.Int64

	// now is the clock conditional prices are resolved against.
	now func() time.Time
}

type cacheKey struct {
	kind, baseURL, model string
}

// entry is a remembered Lookup result; m is nil for "no price".
type entry struct {
	m        *model
	provider string
}

//go:embed data/genai-prices-data.json
var builtinJSON string

var (
	builtinOnce  sync.Once
	builtinTable *Table
)

// Builtin returns the table embedded in the binary. It is parsed on first
// use; a broken embedded file panics (a test guarantees it is not).
func Builtin() *Table {
	builtinOnce.Do(func() {
		t, err := Load(strings.NewReader(builtinJSON))
		if err != nil {
			panic("prices: embedded genai-prices-data.json: " + err.Error())
		}
		builtinTable = t
	})
	return builtinTable
}

// Lookup finds the price of model as served by a deployment of Tollgate
// provider kind kind with API root baseURL.
//
// The provider is chosen by kind when the kind names a vendor (openai,
// anthropic, gemini → google, bedrock → aws, azure-openai → azure, or a
// genai-prices provider id or provider_match such as "groq" or "xai");
// for "openai-compatible" and when that fails, by the first provider whose
// api_pattern matches the start of baseURL (https://api.groq.com/openai/v1
// is groq). Within the provider the models' match rules decide.
//
// The "demo" kind is free: Price{} with ok=true and Provider "tollgate".
// An unknown provider or model returns ok=false: the caller must treat the
// call as unpriced, not as free.
//
// Results are cached per (kind, baseURL, model); a cached lookup does not
// allocate.
func (t *Table) Lookup(kind, baseURL, model string) (Match, bool) {
	if kind == "demo" {
		return Match{Provider: DemoProvider, Model: model}, true
	}
	e := t.entryFor(kind, baseURL, model)
	if e.m == nil {
		return Match{}, false
	}
	return Match{Price: e.m.priceAt(t.now), Provider: e.provider, Model: e.m.id}, true
}

// MaxCost bounds the cost of a call to model as Lookup finds it (see
// Price.MaxCost) over all of the model's time-of-day and start-date
// prices: what a budget reservation must assume for a call that may end
// after the price changes. ok is false when the model has no price.
func (t *Table) MaxCost(kind, baseURL, model string, prompt, completion int64) (cost int64, ok bool) {
	if kind == "demo" {
		return 0, true
	}
	e := t.entryFor(kind, baseURL, model)
	if e.m == nil {
		return 0, false
	}
	cost = e.m.price.MaxCost(prompt, completion)
	for i := range e.m.cond {
		cost = max(cost, e.m.cond[i].price.MaxCost(prompt, completion))
	}
	return cost, true
}

// entryFor returns the (cached) resolution of a deployment's model.
func (t *Table) entryFor(kind, baseURL, model string) *entry {
	k := cacheKey{kind, baseURL, model}
	v, ok := t.cache.Load(k)
	if !ok {
		v = t.remember(k, t.resolve(kind, baseURL, model))
	}
	return v.(*entry)
}

// remember stores e under k unless the cache is full, and returns the
// entry that is now cached (or e).
func (t *Table) remember(k cacheKey, e *entry) any {
	if t.cached.Load() >= maxCached {
		return e
	}
	v, loaded := t.cache.LoadOrStore(k, e)
	if !loaded {
		t.cached.Add(1)
	}
	return v
}

// resolve does the uncached work of Lookup.
func (t *Table) resolve(kind, baseURL, model string) *entry {
	p := t.providerFor(kind, baseURL)
	if p == nil || model == "" {
		return &entry{}
	}
	name := strings.ToLower(strings.TrimSpace(model))
	if m := p.find(name); m != nil {
		return &entry{m: m, provider: p.id}
	}
	for _, fb := range p.fallbacks {
		if m := fb.find(name); m != nil {
			return &entry{m: m, provider: p.id}
		}
	}
	return &entry{}
}

// providerFor picks the provider of a deployment: by kind, else by URL.
func (t *Table) providerFor(kind, baseURL string) *provider {
	kind = strings.ToLower(strings.TrimSpace(kind))
	if !genericKinds[kind] {
		if id, ok := kindProviders[kind]; ok {
			if p := t.byID[id]; p != nil {
				return p
			}
		} else if p := t.byID[kind]; p != nil {
			return p
		} else {
			for _, p := range t.providers {
				if p.providerMatch != nil && p.providerMatch.match(kind) {
					return p
				}
			}
		}
	}
	if baseURL = strings.TrimSpace(baseURL); baseURL == "" {
		return nil
	}
	for _, p := range t.providers {
		if p.api.MatchString(baseURL) {
			return p
		}
	}
	return nil
}

// find returns the first model whose rule matches the lower-cased name.
func (p *provider) find(name string) *model {
	for i := range p.models {
		if p.models[i].match.match(name) {
			return &p.models[i]
		}
	}
	return nil
}

// priceAt resolves the model's price at the clock's current time.
func (m *model) priceAt(now func() time.Time) Price {
	if len(m.cond) == 0 {
		return m.price
	}
	at := now().UTC()
	unix := at.Unix()
	h, mi, s := at.Clock()
	sec := int64(h*3600 + mi*60 + s)
	for i := len(m.cond) - 1; i >= 0; i-- {
		if m.cond[i].activeAt(unix, sec) {
			return m.cond[i].price
		}
	}
	return m.cond[0].price
}

func (c *condPrice) activeAt(unix, secOfDay int64) bool {
	switch c.kind {
	case condStartDate:
		return unix >= c.start
	case condTimeOfDay:
		if c.start <= c.end {
			return secOfDay >= c.start && secOfDay < c.end
		}
		return secOfDay >= c.start || secOfDay < c.end // wraps midnight
	default:
		return true
	}
}
