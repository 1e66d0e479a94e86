package prices

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
)

// maxUSDPerMtok bounds a price in the data; anything above is taken for a
// broken file rather than a price.
const maxUSDPerMtok = 1e9

type provider struct {
	id            string
	api           *regexp.Regexp // anchored at the start of the URL
	providerMatch *clause        // nil when the data has none
	models        []model
	fallbackIDs   []string
	fallbacks     []*provider
}

type model struct {
	id    string
	match clause
	price Price       // when cond is empty
	cond  []condPrice // in data order; the last active one wins
}

type condKind uint8

const (
	condAlways condKind = iota
	condStartDate
	condTimeOfDay
)

// condPrice is one entry of a conditional price list. For condStartDate,
// start is the Unix time of 00:00 UTC on the start date; for condTimeOfDay,
// start and end are seconds after midnight UTC.
type condPrice struct {
	kind       condKind
	start, end int64
	price      Price
}

// The parts of the genai-prices format this package reads; other fields
// (names, descriptions, usage extractors, ...) are ignored.
type rawProvider struct {
	ID            string          `json:"id"`
	APIPattern    *string         `json:"api_pattern"`
	ProviderMatch json.RawMessage `json:"provider_match"`
	ModelMatch    json.RawMessage `json:"model_match"`
	Fallbacks     []string        `json:"fallback_model_providers"`
	Models        []rawModel      `json:"models"`
}

type rawModel struct {
	ID     string          `json:"id"`
	Match  json.RawMessage `json:"match"`
	Prices json.RawMessage `json:"prices"`
}

// Load reads a price table in the genai-prices JSON format (a list of
// providers, as in data/genai-prices-data.json). Every match rule and
// api_pattern must compile and every price must be a non-negative number
// or tiered price; a table with no providers is an error.
func Load(r io.Reader) (*Table, error) {
	dec := json.NewDecoder(r)
	var raw []rawProvider
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("prices: decoding table (want a JSON list of providers): %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("prices: trailing data after the list of providers")
	}
	if len(raw) == 0 {
		return nil, errors.New("prices: the table lists no providers")
	}
	t := &Table{byID: make(map[string]*provider, len(raw)), now: time.Now}
	for i := range raw {
		p, err := compileProvider(&raw[i])
		if err != nil {
			return nil, fmt.Errorf("prices: provider %d (%q): %w", i, raw[i].ID, err)
		}
		if t.byID[p.id] != nil {
			return nil, fmt.Errorf("prices: provider %q is listed twice", p.id)
		}
		t.byID[p.id] = p
		t.providers = append(t.providers, p)
		t.models += len(p.models)
	}
	for _, p := range t.providers {
		for _, id := range p.fallbackIDs {
			// Unknown ids are ignored, as upstream does.
			if fb := t.byID[id]; fb != nil && fb != p {
				p.fallbacks = append(p.fallbacks, fb)
			}
		}
	}
	return t, nil
}

func compileProvider(rp *rawProvider) (*provider, error) {
	if rp.ID == "" {
		return nil, errors.New("no id")
	}
	if rp.APIPattern == nil || *rp.APIPattern == "" {
		return nil, errors.New("no api_pattern")
	}
	api, err := regexp.Compile("(?i)^(?:" + *rp.APIPattern + ")")
	if err != nil {
		return nil, fmt.Errorf("api_pattern: %w", err)
	}
	p := &provider{id: rp.ID, api: api, fallbackIDs: rp.Fallbacks}
	if len(rp.ProviderMatch) > 0 && !isNull(rp.ProviderMatch) {
		c, err := parseClause(rp.ProviderMatch)
		if err != nil {
			return nil, fmt.Errorf("provider_match: %w", err)
		}
		p.providerMatch = &c
	}
	if len(rp.ModelMatch) > 0 && !isNull(rp.ModelMatch) {
		// model_match guesses a provider from a bare model name. Lookup
		// always knows the deployment, so it is only checked here.
		if _, err := parseClause(rp.ModelMatch); err != nil {
			return nil, fmt.Errorf("model_match: %w", err)
		}
	}
	if rp.Models == nil {
		return nil, errors.New("no models list")
	}
	p.models = make([]model, 0, len(rp.Models))
	for i := range rp.Models {
		m, err := compileModel(&rp.Models[i])
		if err != nil {
			return nil, fmt.Errorf("model %d (%q): %w", i, rp.Models[i].ID, err)
		}
		p.models = append(p.models, m)
	}
	return p, nil
}

func compileModel(rm *rawModel) (model, error) {
	if rm.ID == "" {
		return model{}, errors.New("no id")
	}
	if len(rm.Match) == 0 || isNull(rm.Match) {
		return model{}, errors.New("no match rule")
	}
	c, err := parseClause(rm.Match)
	if err != nil {
		return model{}, fmt.Errorf("match: %w", err)
	}
	m := model{id: rm.ID, match: c}
	raw := bytes.TrimSpace(rm.Prices)
	switch {
	case len(raw) == 0 || isNull(raw):
		return model{}, errors.New("no prices")
	case raw[0] == '[':
		m.cond, err = parseConditional(raw)
		if err != nil {
			return model{}, err
		}
		if len(m.cond) == 1 && m.cond[0].kind == condAlways {
			m.price, m.cond = m.cond[0].price, nil
		}
	default:
		if m.price, err = parseModelPrice(raw); err != nil {
			return model{}, fmt.Errorf("prices: %w", err)
		}
	}
	return m, nil
}

// parseConditional reads a list of ConditionalPrice entries. An entry with
// a field or a constraint this package does not know is dropped, so that it
// is never chosen: newer tables qualify prices in ways Lookup cannot see
// (batch, flex, ...), and such a price must not replace the standard one.
func parseConditional(raw []byte) ([]condPrice, error) {
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	var out []condPrice
	for i, e := range entries {
		cp, usable, err := parseCondEntry(e)
		if err != nil {
			return nil, fmt.Errorf("prices[%d]: %w", i, err)
		}
		if usable {
			out = append(out, cp)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("prices: no usable entry in the conditional price list")
	}
	return out, nil
}

func parseCondEntry(e map[string]json.RawMessage) (cp condPrice, usable bool, err error) {
	for k := range e {
		if k != "constraint" && k != "prices" {
			return condPrice{}, false, nil
		}
	}
	pr, ok := e["prices"]
	if !ok || isNull(pr) {
		return condPrice{}, false, errors.New("no prices")
	}
	if cp.price, err = parseModelPrice(pr); err != nil {
		return condPrice{}, false, err
	}
	c, ok := e["constraint"]
	if !ok || isNull(c) {
		return cp, true, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(c, &fields); err != nil {
		return condPrice{}, false, fmt.Errorf("constraint: %w", err)
	}
	cons := make(map[string]string, len(fields))
	for k, v := range fields {
		var s string
		if err := json.Unmarshal(v, &s); err != nil || s == "" {
			return condPrice{}, false, nil // not a shape this package knows
		}
		cons[k] = s
	}
	delete(cons, "type") // newer tables tag constraints with their type
	switch {
	case len(cons) == 1 && cons["start_date"] != "":
		d, err := time.Parse(time.DateOnly, cons["start_date"])
		if err != nil {
			return condPrice{}, false, fmt.Errorf("constraint start_date: %w", err)
		}
		cp.kind, cp.start = condStartDate, d.Unix()
	case len(cons) == 2 && cons["start_time"] != "" && cons["end_time"] != "":
		cp.kind = condTimeOfDay
		if cp.start, err = parseTimeOfDay(cons["start_time"]); err != nil {
			return condPrice{}, false, fmt.Errorf("constraint start_time: %w", err)
		}
		if cp.end, err = parseTimeOfDay(cons["end_time"]); err != nil {
			return condPrice{}, false, fmt.Errorf("constraint end_time: %w", err)
		}
	default:
		return condPrice{}, false, nil
	}
	return cp, true, nil
}

// parseTimeOfDay reads an ISO time of day such as "16:30:00Z" and returns
// its seconds after midnight UTC; a time without zone is UTC.
func parseTimeOfDay(s string) (int64, error) {
	for _, layout := range []string{"15:04:05Z07:00", "15:04:05.999999999Z07:00", "15:04Z07:00", "15:04:05", "15:04:05.999999999", "15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			h, m, sec := t.UTC().Clock()
			return int64(h*3600 + m*60 + sec), nil
		}
	}
	return 0, fmt.Errorf("%q is not a time of day", s)
}

// parseModelPrice reads a ModelPrice object. The schema allows any key with
// a number or tiered value; all are checked, four are kept. The tiers of
// the four become Price.Tiers: one tier per distinct start, where each
// component has its rate for that prompt length (its base rate if it has
// no tier that low).
func parseModelPrice(raw []byte) (Price, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return Price{}, err
	}
	var p Price
	kept := map[string]amount{}
	for k, v := range obj {
		a, err := parseAmount(v)
		if err != nil {
			return Price{}, fmt.Errorf("%s: %w", k, err)
		}
		switch k {
		case "input_mtok":
			p.InputMicros = a.base
		case "output_mtok":
			p.OutputMicros = a.base
		case "cache_read_mtok":
			p.CachedInputMicros = a.base
		case "cache_write_mtok":
			p.CacheWriteMicros = a.base
		default:
			continue
		}
		kept[k] = a
	}
	var starts []int64
	for _, a := range kept {
		for _, t := range a.tiers {
			starts = append(starts, t.start)
		}
	}
	slices.Sort(starts)
	for _, start := range slices.Compact(starts) {
		p.Tiers = append(p.Tiers, Tier{Above: start,
			InputMicros: kept["input_mtok"].at(start), OutputMicros: kept["output_mtok"].at(start),
			CachedInputMicros: kept["cache_read_mtok"].at(start), CacheWriteMicros: kept["cache_write_mtok"].at(start)})
	}
	return p, nil
}

// amount is a price read from the table: a base rate and the tiers above
// it, ascending by start.
type amount struct {
	base  int64
	tiers []tierAmount
}

type tierAmount struct{ start, micros int64 }

// at returns the rate of a prompt of more than start tokens.
func (a amount) at(start int64) int64 {
	r := a.base
	for _, t := range a.tiers {
		if t.start <= start {
			r = t.micros
		}
	}
	return r
}

type rawTiered struct {
	Base  *float64 `json:"base"`
	Tiers []struct {
		Start *int64   `json:"start"`
		Price *float64 `json:"price"`
	} `json:"tiers"`
}

// parseAmount reads a price in USD (per million tokens, or per thousand
// requests) as micro-dollars, with its tiers if it has any.
func parseAmount(v json.RawMessage) (amount, error) {
	v = bytes.TrimSpace(v)
	if isNull(v) {
		return amount{}, nil
	}
	if len(v) > 0 && v[0] == '{' {
		var t rawTiered
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return amount{}, fmt.Errorf("tiered price: %w", err)
		}
		if t.Base == nil || t.Tiers == nil {
			return amount{}, errors.New("tiered price needs base and tiers")
		}
		base, err := toMicros(*t.Base)
		if err != nil {
			return amount{}, err
		}
		a := amount{base: base}
		for _, tier := range t.Tiers {
			if tier.Price == nil || tier.Start == nil {
				return amount{}, errors.New("a tier needs start and price")
			}
			if *tier.Start < 0 {
				return amount{}, fmt.Errorf("tier start %d is negative", *tier.Start)
			}
			m, err := toMicros(*tier.Price)
			if err != nil {
				return amount{}, fmt.Errorf("tier: %w", err)
			}
			a.tiers = append(a.tiers, tierAmount{*tier.Start, m})
		}
		slices.SortStableFunc(a.tiers, func(x, y tierAmount) int { return cmp.Compare(x.start, y.start) })
		return a, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return amount{}, err
	}
	m, err := toMicros(f)
	return amount{base: m}, err
}

// toMicros converts USD to micro-dollars, rounded to the nearest.
func toMicros(usd float64) (int64, error) {
	if math.IsNaN(usd) || usd < 0 || usd > maxUSDPerMtok {
		return 0, fmt.Errorf("price %v out of range [0, %g]", usd, maxUSDPerMtok)
	}
	return int64(math.Round(usd * 1e6)), nil
}

func isNull(b []byte) bool {
	return string(bytes.TrimSpace(b)) == "null"
}

// A clause is a compiled match rule.
type clause struct {
	op  clauseOp
	s   string // lower-cased literal
	re  *regexp.Regexp
	sub []clause
}

type clauseOp uint8

const (
	opEquals clauseOp = iota
	opStartsWith
	opEndsWith
	opContains
	opRegex
	opOr
	opAnd
)

var clauseOps = map[string]clauseOp{
	"equals":      opEquals,
	"starts_with": opStartsWith,
	"ends_with":   opEndsWith,
	"contains":    opContains,
	"regex":       opRegex,
	"or":          opOr,
	"and":         opAnd,
}

// parseClause compiles a match rule: an object with exactly one of the
// keys in clauseOps.
func parseClause(raw []byte) (clause, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return clause{}, err
	}
	if len(obj) != 1 {
		return clause{}, fmt.Errorf("a match rule needs exactly one key, has %d", len(obj))
	}
	for k, v := range obj {
		op, ok := clauseOps[k]
		if !ok {
			return clause{}, fmt.Errorf("unknown match rule %q", k)
		}
		c := clause{op: op}
		switch op {
		case opOr, opAnd:
			var subs []json.RawMessage
			if err := json.Unmarshal(v, &subs); err != nil {
				return clause{}, fmt.Errorf("%s: %w", k, err)
			}
			if len(subs) == 0 {
				return clause{}, fmt.Errorf("%s: empty list", k)
			}
			c.sub = make([]clause, len(subs))
			for i, s := range subs {
				var err error
				if c.sub[i], err = parseClause(s); err != nil {
					return clause{}, fmt.Errorf("%s[%d]: %w", k, i, err)
				}
			}
		default:
			var s string
			if err := json.Unmarshal(v, &s); err != nil || isNull(v) {
				return clause{}, fmt.Errorf("%s: want a string", k)
			}
			if s == "" {
				return clause{}, fmt.Errorf("%s: empty string", k)
			}
			if op == opRegex {
				re, err := regexp.Compile("(?i)" + s)
				if err != nil {
					return clause{}, fmt.Errorf("regex: %w", err)
				}
				c.re = re
			} else {
				c.s = strings.ToLower(s)
			}
		}
		return c, nil
	}
	panic("unreachable")
}

// match reports whether the rule accepts name, which is lower-cased.
func (c *clause) match(name string) bool {
	switch c.op {
	case opEquals:
		return name == c.s
	case opStartsWith:
		return strings.HasPrefix(name, c.s)
	case opEndsWith:
		return strings.HasSuffix(name, c.s)
	case opContains:
		return strings.Contains(name, c.s)
	case opRegex:
		return c.re.MatchString(name)
	case opOr:
		for i := range c.sub {
			if c.sub[i].match(name) {
				return true
			}
		}
		return false
	case opAnd:
		for i := range c.sub {
			if !c.sub[i].match(name) {
				return false
			}
		}
		return true
	}
	return false
}
