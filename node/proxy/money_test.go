package proxy

import (
	"math"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/raftstore"
)

// Amounts print as dollars with four decimals and are never negative: a
// saturated or overflowed spend must not read "spent $-9223372036.-8547".
func TestUSDNeverPrintsNegative(t *testing.T) {
	for _, tc := range []struct {
		nanos int64
		want  string
	}{
		{0, "$0.0000"},
		{49_999, "$0.0000"},
		{50_000, "$0.0001"},
		{1_234_567_890, "$1.2346"},
		{math.MaxInt64, "$9223372036.8548"},
		{-1, "$0.0000"},
		{math.MinInt64, "$0.0000"},
	} {
		if got := usd(tc.nanos); got != tc.want {
			t.Errorf("usd(%d) = %q, want %q", tc.nanos, got, tc.want)
		}
	}
	msg := errBudgetExceeded(&budget.Exceeded{Budget: &raftstore.Limit{ID: "key:k", LimitNanos: 1e9, Period: "total"},
		SpentNanos: math.MinInt64}, 5).msg
	if strings.Contains(msg, "-") {
		t.Errorf("refusal reads %q", msg)
	}
}
