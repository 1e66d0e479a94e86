package main

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// limitFlags are the rate limit settings shared by keys, teams and
// deployments. what is "key", "team" or "deployment", for help texts.
type limitFlags struct {
	what                  string
	rpm, tpm, maxParallel int64
	none                  bool
}

var limitFlagNames = []string{"rpm", "tpm", "max-parallel"}

// register adds --rpm, --tpm and --max-parallel, and for update
// --no-limits.
func (l *limitFlags) register(cmd *cobra.Command, update bool) {
	f := cmd.Flags()
	if update {
		f.Int64Var(&l.rpm, "rpm", 0, "new limit of requests per minute; 0 removes it (the other limits are kept unless given)")
		f.Int64Var(&l.tpm, "tpm", 0, "new limit of tokens (prompt plus completion) per minute; 0 removes it")
		f.Int64Var(&l.maxParallel, "max-parallel", 0, "new limit of requests in flight at once; 0 removes it")
		f.BoolVar(&l.none, "no-limits", false, "remove all of the "+l.what+"'s rate limits")
		for _, n := range limitFlagNames {
			cmd.MarkFlagsMutuallyExclusive("no-limits", n)
		}
		return
	}
	f.Int64Var(&l.rpm, "rpm", 0, "limit of requests per minute, cluster-wide (default 0: unlimited)")
	f.Int64Var(&l.tpm, "tpm", 0, "limit of tokens (prompt plus completion) per minute, cluster-wide (default 0: unlimited)")
	f.Int64Var(&l.maxParallel, "max-parallel", 0, "limit of requests in flight at once, cluster-wide (default 0: unlimited)")
}

// changed reports whether any of --rpm, --tpm or --max-parallel was given
// (not --no-limits).
func (l *limitFlags) changed(f *pflag.FlagSet) bool {
	return f.Changed("rpm") || f.Changed("tpm") || f.Changed("max-parallel")
}

// complete reports whether the flags alone define all limits, so that
// update need not fetch the current ones.
func (l *limitFlags) complete(f *pflag.FlagSet) bool {
	return f.Changed("rpm") && f.Changed("tpm") && f.Changed("max-parallel")
}

// needCurrent reports whether update must fetch the current limits.
func (l *limitFlags) needCurrent(f *pflag.FlagSet) bool {
	return l.changed(f) && !l.complete(f)
}

// check rejects negative values before anything is sent.
func (l *limitFlags) check() error {
	for _, v := range []struct {
		flag string
		n    int64
	}{{"rpm", l.rpm}, {"tpm", l.tpm}, {"max-parallel", l.maxParallel}} {
		if v.n < 0 {
			return usageErrorf("invalid --%s %d: must not be negative (0 means unlimited)", v.flag, v.n)
		}
	}
	return nil
}

// create returns the limits for a create request, nil when all are zero.
func (l *limitFlags) create() (*tollgatev1.RateLimits, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	if l.rpm == 0 && l.tpm == 0 && l.maxParallel == 0 {
		return nil, nil
	}
	return &tollgatev1.RateLimits{Rpm: l.rpm, Tpm: l.tpm, MaxParallel: l.maxParallel}, nil
}

// update returns the limits for an update request: nil when no limit flag
// was given, all zero for --no-limits, else the given flags over the
// current limits cur (nil when there are none, or when they were not
// fetched because the flags are complete).
func (l *limitFlags) update(f *pflag.FlagSet, cur *tollgatev1.RateLimits) *tollgatev1.RateLimits {
	if l.none {
		return &tollgatev1.RateLimits{}
	}
	if !l.changed(f) {
		return nil
	}
	out := &tollgatev1.RateLimits{Rpm: cur.GetRpm(), Tpm: cur.GetTpm(), MaxParallel: cur.GetMaxParallel()}
	if f.Changed("rpm") {
		out.Rpm = l.rpm
	}
	if f.Changed("tpm") {
		out.Tpm = l.tpm
	}
	if f.Changed("max-parallel") {
		out.MaxParallel = l.maxParallel
	}
	return out
}

// fmtLimits renders the set limits as "600rpm 100000tpm 8par", "-" when
// there are none.
func fmtLimits(l *tollgatev1.RateLimits) string {
	var parts []string
	for _, p := range []struct {
		n    int64
		unit string
	}{{l.GetRpm(), "rpm"}, {l.GetTpm(), "tpm"}, {l.GetMaxParallel(), "par"}} {
		if p.n != 0 {
			parts = append(parts, strconv.FormatInt(p.n, 10)+p.unit)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
