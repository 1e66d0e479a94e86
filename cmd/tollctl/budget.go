package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// budgetFlags are the budget settings shared by keys and teams. what is
// "key" or "team", for help and error texts.
type budgetFlags struct {
	what          string
	amount        string
	period        string
	allowUnpriced bool
	none          bool
}

// register adds --budget, --period and --allow-unpriced, and for update
// --no-budget.
func (b *budgetFlags) register(cmd *cobra.Command, update bool) {
	f := cmd.Flags()
	if update {
		f.StringVar(&b.amount, "budget", "", "new spend limit in dollars per period, e.g. 100 or 12.50 (keeps the period and --allow-unpriced of the current budget unless given)")
		f.StringVar(&b.period, "period", "", "budget period: "+strings.Join(periods, ", ")+" (required with --budget when the "+b.what+" has no budget yet)")
		f.BoolVar(&b.allowUnpriced, "allow-unpriced", false, "let requests for models without a known price through (their cost is not counted); --allow-unpriced=false refuses them")
		f.BoolVar(&b.none, "no-budget", false, "remove the "+b.what+"'s own budget")
		cmd.MarkFlagsMutuallyExclusive("no-budget", "budget")
		cmd.MarkFlagsMutuallyExclusive("no-budget", "period")
		cmd.MarkFlagsMutuallyExclusive("no-budget", "allow-unpriced")
		return
	}
	f.StringVar(&b.amount, "budget", "", "spend limit in dollars per period, e.g. 100, 12.50 or $0.75 (default: no budget of its own)")
	f.StringVar(&b.period, "period", "", "budget period, needed with --budget: "+strings.Join(periods, ", ")+" (day, week from Monday and month are UTC calendar periods; total never resets)")
	f.BoolVar(&b.allowUnpriced, "allow-unpriced", false, "let requests for models without a known price through (their cost is not counted); refused by default")
}

// changed reports whether any budget setting was given (not --no-budget).
func (b *budgetFlags) changed(f *pflag.FlagSet) bool {
	return f.Changed("budget") || f.Changed("period") || f.Changed("allow-unpriced")
}

// complete reports whether the flags alone define a whole budget, so that
// update need not fetch the current one.
func (b *budgetFlags) complete(f *pflag.FlagSet) bool {
	return f.Changed("budget") && f.Changed("period") && f.Changed("allow-unpriced")
}

// check validates the given flags before anything is sent.
func (b *budgetFlags) check(f *pflag.FlagSet) error {
	if f.Changed("budget") {
		n, err := moneyFlag("budget", b.amount, nanoDecimals)
		if err != nil {
			return err
		}
		if n <= 0 {
			return usageErrorf("--budget must be more than $0")
		}
	}
	if f.Changed("period") {
		return checkPeriod(b.period)
	}
	return nil
}

// create returns the budget for a create request, nil without --budget.
func (b *budgetFlags) create(f *pflag.FlagSet) (*tollgatev1.Budget, error) {
	if err := b.check(f); err != nil {
		return nil, err
	}
	if !f.Changed("budget") {
		if b.changed(f) {
			return nil, usageErrorf("--period and --allow-unpriced need --budget")
		}
		return nil, nil
	}
	if !f.Changed("period") {
		return nil, usageErrorf("--budget needs --period (%s)", strings.Join(periods, ", "))
	}
	n, _ := parseDollars(b.amount)
	return &tollgatev1.Budget{LimitNanos: n, Period: b.period, AllowUnpriced: b.allowUnpriced}, nil
}

// merge returns the budget for an update: the given flags over the current
// budget cur (nil when there is none, or when it was not fetched because
// the flags are complete).
func (b *budgetFlags) merge(f *pflag.FlagSet, id string, cur *tollgatev1.Budget) (*tollgatev1.Budget, error) {
	out := &tollgatev1.Budget{}
	if cur != nil {
		out.LimitNanos, out.Period, out.AllowUnpriced = cur.GetLimitNanos(), cur.GetPeriod(), cur.GetAllowUnpriced()
	}
	if f.Changed("budget") {
		out.LimitNanos, _ = parseDollars(b.amount)
	} else if cur == nil {
		return nil, usageErrorf("%s %s has no budget yet: give --budget and --period", b.what, id)
	}
	if f.Changed("period") {
		out.Period = b.period
	} else if cur == nil {
		return nil, usageErrorf("%s %s has no budget yet: --budget needs --period (%s)", b.what, id, strings.Join(periods, ", "))
	}
	if f.Changed("allow-unpriced") {
		out.AllowUnpriced = b.allowUnpriced
	}
	return out, nil
}

// fmtBudget describes a budget in one line, "-" when there is none.
func fmtBudget(b *tollgatev1.Budget) string {
	if b == nil {
		return "-"
	}
	unpriced := "refused"
	if b.GetAllowUnpriced() {
		unpriced = "allowed"
	}
	return fmt.Sprintf("%s %s (unpriced models %s)", fmtNanos(b.GetLimitNanos()), perPeriod(b.GetPeriod()), unpriced)
}

// perPeriod is "per month", or "in total" for a budget that never resets.
func perPeriod(p string) string {
	if p == "total" {
		return "in total"
	}
	return "per " + orDash(p)
}

// fmtBudgetStatus describes a budget's current period in one line.
func fmtBudgetStatus(st *tollgatev1.BudgetStatus) string {
	return fmt.Sprintf("%s spent, %s leased, %s remaining of %s %s; %s",
		fmtNanos(st.GetSpentNanos()), fmtNanos(st.GetLeasedNanos()), fmtNanos(st.GetRemainingNanos()),
		fmtNanos(st.GetLimitNanos()), perPeriod(st.GetPeriod()), fmtReset(st))
}

func fmtReset(st *tollgatev1.BudgetStatus) string {
	if st.GetResetAt() == 0 {
		return "never resets"
	}
	return "resets " + fmtUnix(st.GetResetAt(), "-")
}

// statusRows writes a budget status as "Field: value" rows.
func statusRows(w io.Writer, st *tollgatev1.BudgetStatus) {
	row(w, "Spent:", fmtNanos(st.GetSpentNanos()))
	row(w, "Leased:", fmtNanos(st.GetLeasedNanos())+" (granted to nodes, not yet settled)")
	row(w, "Remaining:", fmtNanos(st.GetRemainingNanos()))
	row(w, "Period start:", fmtUnix(st.GetPeriodStart(), "-"))
	row(w, "Resets at:", fmtUnix(st.GetResetAt(), "never"))
}

// mergeSettings returns the budget and the rate limits of an update request. Both are
// replaced as wholes, so the settings the flags leave out are taken from the key's or
// team's current ones, which current fetches only when the flags do not say everything.
func mergeSettings(f *pflag.FlagSet, id string, b *budgetFlags, l *limitFlags,
	current func() (*tollgatev1.Budget, *tollgatev1.RateLimits, error)) (*tollgatev1.Budget, *tollgatev1.RateLimits, error) {
	var (
		curBudget *tollgatev1.Budget
		curLimits *tollgatev1.RateLimits
		budget    *tollgatev1.Budget
		err       error
	)
	if (b.changed(f) && !b.complete(f)) || l.needCurrent(f) {
		if curBudget, curLimits, err = current(); err != nil {
			return nil, nil, err
		}
	}
	if b.changed(f) {
		if budget, err = b.merge(f, id, curBudget); err != nil {
			return nil, nil, err
		}
	}
	return budget, l.update(f, curLimits), nil
}
