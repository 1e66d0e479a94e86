package raftstore

import (
	"fmt"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

type spendTotals struct{ requests, cost int64 }

// feedHours applies one spend report per hour for days days, each holding
// an hourly rollup for 3 keys × 2 models, at the report's (fake) time an
// hour after the hour it reports. It returns the input's totals by hour.
func feedHours(h *harness, start int64, days int) map[int64]spendTotals {
	in := map[int64]spendTotals{}
	for i := range days * 24 {
		hour := start + int64(i)*3600
		var rs []*pb.SpendRollup
		for k := range 3 {
			for m := range 2 {
				rs = append(rs, &pb.SpendRollup{HourUnix: hour, KeyId: fmt.Sprintf("k%d", k), Model: fmt.Sprintf("m%d", m),
					Requests: 1, CostNanos: int64(i + 1), PromptTokens: 10})
			}
		}
		t := in[hour]
		t.requests += int64(len(rs))
		t.cost += int64(len(rs)) * int64(i+1)
		in[hour] = t
		h.must(at(&pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{Node: "n1", Seq: uint64(i + 1), Rollups: rs}}},
			(hour+3600)*1e9))
	}
	return in
}

func walkTotals(st *State) spendTotals {
	var t spendTotals
	st.WalkRollups(0, 1<<62, func(r *pb.SpendRollup) bool {
		t.requests += r.GetRequests()
		t.cost += r.GetCostNanos()
		return true
	})
	return t
}

// TestRollupsFoldIntoDaysAndKeepTotals feeds 90 days of hourly spend
// through spend reports: hourly rollups older than 35 days are folded into
// daily ones, so the rollup count stays within the retention's bound, and
// the totals over all time are the input's.
func TestRollupsFoldIntoDaysAndKeepTotals(t *testing.T) {
	h := newHarness(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	in := feedHours(h, start, 90)
	var want spendTotals
	for _, v := range in {
		want.requests += v.requests
		want.cost += v.cost
	}
	st := h.state()
	if got := walkTotals(st); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	const perHour = 6
	if n := st.rollups.Len(); n > (35*24+2)*perHour {
		t.Errorf("%d hourly rollups, want at most %d", n, (35*24+2)*perHour)
	}
	if n := st.daily.Len(); n < 50*perHour || n > 56*perHour {
		t.Errorf("%d daily rollups, want about 55 days' worth", n)
	}
	// Daily rows carry their day's start, and a range that touches a day
	// takes its whole daily row.
	for _, r := range [][2]int64{{0, start + 86400}, {start + 7200, start + 7201}} {
		n := 0
		st.WalkRollups(r[0], r[1], func(r *pb.SpendRollup) bool {
			n++
			if r.GetHourUnix() != start || r.GetRequests() != 24 {
				t.Errorf("first day's rollup %v", r)
			}
			return true
		})
		if n != perHour {
			t.Errorf("range %v: %d rollups, want %d", r, n, perHour)
		}
	}
	// A snapshot carries both and restores them.
	if got := walkTotals(restored(t, persist(t, h.f))); got != want {
		t.Errorf("after restore: totals %+v, want %+v", got, want)
	}
}

// TestDailyRollupsExpire feeds 90 days with a short retention (2 days
// hourly, 10 days daily): only the last days remain, and exactly their
// spend.
func TestDailyRollupsExpire(t *testing.T) {
	h := newHarness(t)
	h.f.setRetention(Retention{Hourly: 48 * time.Hour, Daily: 10 * 24 * time.Hour})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	in := feedHours(h, start, 90)
	now := start + 90*24*3600 // the last report's time
	dayCutoff := now - 10*86400
	var want spendTotals
	for hour, v := range in {
		if day := hour - hour%86400; day+86400 > dayCutoff {
			want.requests += v.requests
			want.cost += v.cost
		}
	}
	st := h.state()
	if got := walkTotals(st); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	if st.rollups.Len() > (48+1)*6 || st.daily.Len() > 11*6 {
		t.Errorf("%d hourly, %d daily rollups", st.rollups.Len(), st.daily.Len())
	}
}

// TestCompactionIsBoundedPerEntry: a report arriving after a long silence
// folds at most compactStep rollups; the rest follow with later reports.
func TestCompactionIsBoundedPerEntry(t *testing.T) {
	h := newHarness(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	var rs []*pb.SpendRollup
	for i := range 600 {
		rs = append(rs, &pb.SpendRollup{HourUnix: start, KeyId: fmt.Sprintf("k%03d", i), Model: "m", Requests: 1})
	}
	h.must(at(&pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{Node: "n1", Seq: 1, Rollups: rs}}}, (start+3600)*1e9))
	later := (start + 40*86400) * 1e9
	h.must(at(&pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{Node: "n1", Seq: 2}}}, later))
	if n := h.state().daily.Len(); n != compactStep {
		t.Fatalf("%d rollups folded by one report, want %d", n, compactStep)
	}
	for seq := uint64(3); seq < 6; seq++ {
		h.must(at(&pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{Node: "n1", Seq: seq}}}, later))
	}
	if st := h.state(); st.daily.Len() != 600 || st.rollups.Len() != 0 || walkTotals(st).requests != 600 {
		t.Fatalf("%d daily, %d hourly", st.daily.Len(), st.rollups.Len())
	}
}
