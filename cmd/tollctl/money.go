package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Money on the command line is in dollars; on the wire it is an integer
// count of a small unit, so amounts are parsed as decimal strings and never
// pass through floating point.
const (
	nanoDecimals  = 9 // spend and budgets: nano-dollars (1e-9 USD)
	microDecimals = 6 // prices: micro-dollars (1e-6 USD) per million tokens
)

// parseFixed parses a non-negative decimal such as "12.50", "$0.75" or
// "100" into an integer count of 10^-decimals units. It rejects signs,
// exponents, separators, more fractional digits than decimals, and values
// that overflow int64. The error says what is wrong, without the flag name.
func parseFixed(s string, decimals int) (int64, error) {
	v := strings.TrimPrefix(strings.TrimSpace(s), "$")
	whole, frac, dot := strings.Cut(v, ".")
	if (whole == "" && frac == "") || (dot && frac == "") || !allDigits(whole) || !allDigits(frac) {
		return 0, fmt.Errorf("want a dollar amount such as 100, 12.50 or $0.75")
	}
	if len(frac) > decimals {
		return 0, fmt.Errorf("more than %d decimals: the smallest unit is $%s", decimals, "0."+strings.Repeat("0", decimals-1)+"1")
	}
	digits := whole + frac + strings.Repeat("0", decimals-len(frac))
	var n int64
	for _, c := range digits {
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("too large")
		}
		n = n*10 + d
	}
	return n, nil
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseDollars parses a dollar amount into nano-dollars.
func parseDollars(s string) (int64, error) { return parseFixed(s, nanoDecimals) }

// parsePrice parses dollars per million tokens into micro-dollars per
// million tokens.
func parsePrice(s string) (int64, error) { return parseFixed(s, microDecimals) }

// moneyFlag parses the dollar amount of flag into nano-dollars (or
// micro-dollars with decimals 6) as a usage error naming the flag.
func moneyFlag(flag, s string, decimals int) (int64, error) {
	n, err := parseFixed(s, decimals)
	if err != nil {
		return 0, usageErrorf("invalid --%s %q: %v", flag, s, err)
	}
	return n, nil
}

// fmtNanos renders nano-dollars as dollars with four decimals, rounded
// half away from zero: 12345678901 is "$12.3457".
func fmtNanos(n int64) string {
	sign, u := "", uint64(n)
	if n < 0 {
		sign, u = "-", uint64(-n) // also right for MinInt64
	}
	r := (u + 50_000) / 100_000 // units of $0.0001
	return fmt.Sprintf("%s$%d.%04d", sign, r/10_000, r%10_000)
}

// fmtMicros renders micro-dollars with at least two and at most six
// decimals, exactly: 2500000 is "$2.50", 75000 is "$0.075".
func fmtMicros(m int64) string {
	sign, u := "", uint64(m)
	if m < 0 {
		sign, u = "-", uint64(-m)
	}
	frac := fmt.Sprintf("%06d", u%1_000_000)
	frac = strings.TrimRight(frac, "0")
	if len(frac) < 2 {
		frac += strings.Repeat("0", 2-len(frac))
	}
	return fmt.Sprintf("%s$%d.%s", sign, u/1_000_000, frac)
}

// periods are the budget periods the server accepts.
var periods = []string{"day", "week", "month", "total"}

func checkPeriod(p string) error {
	for _, q := range periods {
		if p == q {
			return nil
		}
	}
	return usageErrorf("invalid --period %q: use day, week, month or total", p)
}

// parseWhen turns a --since or --until value into Unix seconds: a
// duration before now (24h, 7d), a date (2026-11-01, midnight UTC), or an
// RFC 3339 time.
func (a *app) parseWhen(flag, s string) (int64, error) {
	t, ok := a.when(s)
	if !ok {
		return 0, usageErrorf("invalid --%s %q: use a time before now such as 24h or 7d, a date such as 2026-11-01 (UTC), or an RFC 3339 time such as 2026-11-01T09:00:00Z", flag, s)
	}
	if t.Unix() < 0 {
		return 0, usageErrorf("invalid --%s %q: before 1970", flag, s)
	}
	return t.Unix(), nil
}

func (a *app) when(s string) (time.Time, bool) {
	if d, err := parseDuration(s); err == nil {
		return a.now().Add(-d), true
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true // midnight UTC
	}
	return time.Time{}, false
}

// fmtUnix renders Unix seconds in UTC; zero is shown as zero.
func fmtUnix(sec int64, zero string) string {
	if sec == 0 {
		return zero
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}

// fmtCount renders a count for tables.
func fmtCount(n int64) string { return strconv.FormatInt(n, 10) }
