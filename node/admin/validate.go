package admin

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// maxNameLen bounds key names, model names and similar identifiers.
const maxNameLen = 200

// checkName checks an identifier-like value (model, deployment or
// credential name): non-empty, at most maxNameLen characters, valid UTF-8
// and without whitespace or control characters. what names it in messages.
func checkName(what, v string) error {
	if v == "" {
		return invalid("%s is required", what)
	}
	if err := checkText(what, v); err != nil {
		return err
	}
	if i := strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return invalid("%s %q must not contain whitespace", what, v)
	}
	return nil
}

// checkText checks free text: valid UTF-8 and at most maxNameLen characters.
func checkText(what, v string) error {
	if !utf8.ValidString(v) {
		return invalid("%s is not valid UTF-8", what)
	}
	if n := utf8.RuneCountInString(v); n > maxNameLen {
		return invalid("%s is %d characters long; the limit is %d", what, n, maxNameLen)
	}
	return nil
}

// checkModelPatterns checks a key's model allow-list.
func checkModelPatterns(models []string) error {
	for i, m := range models {
		if m == "" {
			return invalid("model pattern %d is empty; give a model name or a pattern such as gpt-*", i+1)
		}
		if err := checkName("model pattern", m); err != nil {
			return err
		}
	}
	return nil
}

// checkMetadata checks key labels. allowEmptyValue is set for updates,
// where an empty value deletes the label.
func checkMetadata(md map[string]string, allowEmptyValue bool) error {
	for k, v := range md {
		if err := checkName("metadata key", k); err != nil {
			return err
		}
		if v == "" && !allowEmptyValue {
			return invalid("metadata %q has an empty value", k)
		}
		if err := checkText("metadata value of "+k, v); err != nil {
			return err
		}
	}
	return nil
}

// checkBudget checks a key's or team's budget; nil means none. what names
// it in messages ("key budget", "team budget").
func checkBudget(what string, b *pb.Budget) error {
	if b == nil {
		return nil
	}
	if b.GetLimitNanos() <= 0 {
		return invalid("%s: limit_nanos must be positive, in nano-dollars (1e-9 USD, so $10 is 10000000000); got %d",
			what, b.GetLimitNanos())
	}
	switch b.GetPeriod() {
	case raftstore.PeriodDay, raftstore.PeriodWeek, raftstore.PeriodMonth, raftstore.PeriodTotal:
	case "":
		return invalid("%s: period is required: day, week, month or total", what)
	default:
		return invalid("%s: period %q is not one of day, week, month, total", what, b.GetPeriod())
	}
	return nil
}

// MaxPriceTiers bounds a price override's long-context tiers.
const MaxPriceTiers = 8

// checkPrice checks a deployment's price override; nil means none. Zero
// prices are allowed (a free model), negative ones are not; tiers ascend
// strictly by their prompt threshold.
func checkPrice(model, deployment string, p *pb.Price) error {
	if p == nil {
		return nil
	}
	type field struct {
		name string
		v    int64
	}
	check := func(where string, fs ...field) error {
		for _, f := range fs {
			if f.v < 0 {
				return invalid("model %q, deployment %q: price %s%s must not be negative; got %d", model, deployment, where, f.name, f.v)
			}
		}
		return nil
	}
	if err := check("",
		field{"input_micros_per_mtok", p.GetInputMicrosPerMtok()},
		field{"output_micros_per_mtok", p.GetOutputMicrosPerMtok()},
		field{"cached_input_micros_per_mtok", p.GetCachedInputMicrosPerMtok()},
		field{"cache_write_micros_per_mtok", p.GetCacheWriteMicrosPerMtok()}); err != nil {
		return err
	}
	if len(p.GetTiers()) > MaxPriceTiers {
		return invalid("model %q, deployment %q: price has %d tiers; at most %d", model, deployment, len(p.GetTiers()), MaxPriceTiers)
	}
	prev := int64(0)
	for i, t := range p.GetTiers() {
		where := fmt.Sprintf("tier %d ", i+1)
		switch above := t.GetAbovePromptTokens(); {
		case above <= 0:
			return invalid("model %q, deployment %q: price %sabove_prompt_tokens must be positive; got %d", model, deployment, where, above)
		case above <= prev:
			return invalid("model %q, deployment %q: price %sstarts above %d prompt tokens, not above the tier before it (%d): tiers must ascend",
				model, deployment, where, above, prev)
		}
		prev = t.GetAbovePromptTokens()
		// A zero cache rate means the tier's input rate: where the base
		// price has its own, a tier without one would charge a long,
		// mostly cached prompt many times its bill.
		if p.GetCachedInputMicrosPerMtok() != 0 && t.GetCachedInputMicrosPerMtok() == 0 {
			return invalid("model %q, deployment %q: price %sneeds cached_input_micros_per_mtok, as the base price has one (zero would mean the tier's input price)", model, deployment, where)
		}
		if p.GetCacheWriteMicrosPerMtok() != 0 && t.GetCacheWriteMicrosPerMtok() == 0 {
			return invalid("model %q, deployment %q: price %sneeds cache_write_micros_per_mtok, as the base price has one (zero would mean the tier's input price)", model, deployment, where)
		}
		if err := check(where,
			field{"input_micros_per_mtok", t.GetInputMicrosPerMtok()},
			field{"output_micros_per_mtok", t.GetOutputMicrosPerMtok()},
			field{"cached_input_micros_per_mtok", t.GetCachedInputMicrosPerMtok()},
			field{"cache_write_micros_per_mtok", t.GetCacheWriteMicrosPerMtok()}); err != nil {
			return err
		}
	}
	return nil
}

// checkRateLimits rejects negative limits (zero means unlimited).
func checkRateLimits(what string, l *pb.RateLimits) error {
	if l.GetRpm() < 0 || l.GetTpm() < 0 || l.GetMaxParallel() < 0 {
		return invalid("%s rate limits must not be negative (0 means unlimited): rpm %d, tpm %d, max_parallel %d",
			what, l.GetRpm(), l.GetTpm(), l.GetMaxParallel())
	}
	return nil
}
