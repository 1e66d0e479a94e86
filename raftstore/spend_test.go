package raftstore

import (
	"errors"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func teamCmd(id string, b *pb.Budget) *pb.Command {
	return &pb.Command{Op: &pb.Command_CreateTeam{CreateTeam: &pb.CreateTeamCommand{Team: &pb.Team{Id: id, Name: "team " + id, Budget: b}}}}
}

func grantCmd(node, budget string, start, want int64) *pb.Command {
	return &pb.Command{Op: &pb.Command_GrantLease{GrantLease: &pb.GrantLeaseCommand{Node: node, Budget: budget, PeriodStart: start, WantNanos: want}}}
}

func reportCmd(node string, seq uint64, budget string, start, spent int64, rollups ...*pb.SpendRollup) *pb.Command {
	return &pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{Node: node, Seq: seq, Rollups: rollups,
		Budgets: []*pb.BudgetUse{{Budget: budget, PeriodStart: start, SpentNanos: spent}}}}}
}

// recentHour is an hour just before the harness's commands, so that its
// rollups are within the hourly retention.
const recentHour = baseNanos/1e9/3600*3600 - 3600

func TestPeriods(t *testing.T) {
	at := time.Date(2026, 11, 30, 19, 5, 0, 0, time.UTC) // a Monday
	for _, tc := range []struct {
		period      string
		start, next time.Time
	}{
		{PeriodDay, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{PeriodWeek, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)},
		{PeriodMonth, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
	} {
		s := PeriodStart(tc.period, at)
		if s != tc.start.Unix() || PeriodReset(tc.period, s) != tc.next.Unix() {
			t.Errorf("%s: start %v reset %v, want %v %v", tc.period, time.Unix(s, 0).UTC(), time.Unix(PeriodReset(tc.period, s), 0).UTC(), tc.start, tc.next)
		}
	}
	sunday := time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC)
	if got := PeriodStart(PeriodWeek, sunday); got != time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC).Unix() {
		t.Errorf("week of a Sunday starts %v", time.Unix(got, 0).UTC())
	}
	if PeriodStart(PeriodTotal, at) != 0 || PeriodReset(PeriodTotal, 0) != 0 {
		t.Error("a total budget has no period")
	}
}

// TestLeasesNeverExceedTheLimit grants leases to several nodes until the
// budget is gone: spent plus leases never exceeds the limit.
func TestLeasesNeverExceedTheLimit(t *testing.T) {
	h := newHarness(t)
	h.must(teamCmd("t1", &pb.Budget{LimitNanos: 1000, Period: PeriodTotal}))
	b := TeamBudgetID("t1")
	check := func() {
		t.Helper()
		bp := h.state().BudgetPeriod(b, 0)
		sum := bp.GetSpentNanos()
		for _, l := range bp.GetLeases() {
			sum += l
		}
		if sum > 1000 {
			t.Fatalf("spent+leases = %d > limit 1000: %v", sum, bp)
		}
	}
	for i := 0; i < 20; i++ {
		for _, n := range []string{"a", "b", "c"} {
			h.must(grantCmd(n, b, 0, 170))
			check()
		}
	}
	bp := h.state().BudgetPeriod(b, 0)
	if bp.GetLeases()["a"]+bp.GetLeases()["b"]+bp.GetLeases()["c"] != 1000 {
		t.Fatalf("the whole budget should be leased out: %v", bp)
	}
	// Spending settles against the node's lease; the freed room is granted
	// again, never more.
	h.must(reportCmd("a", 1, b, 0, 300))
	if got := h.state().BudgetPeriod(b, 0); got.GetSpentNanos() != 300 || got.GetLeases()["a"] != 340-300 {
		t.Fatalf("after a report: %v", got)
	}
	h.must(grantCmd("b", b, 0, 10_000))
	check()
	// A node's spend over its lease (an estimate that was too low) is still
	// counted, and its lease does not go negative.
	h.must(reportCmd("c", 1, b, 0, 1000))
	if got := h.state().BudgetPeriod(b, 0); got.GetLeases()["c"] != 0 || got.GetSpentNanos() != 1300 {
		t.Fatalf("overspend: %v", got)
	}
	if v, err := h.apply(grantCmd("a", b, 0, 10)); err != nil || v.(*pb.BudgetPeriod).GetLeases()["a"] != 40 {
		t.Fatalf("grant on an exhausted budget: %v %v", v, err)
	}
	if _, err := h.apply(grantCmd("a", "team:none", 0, 10)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("grant on a missing budget: %v", err)
	}
}

// TestSpendReportIsIdempotent: a report applied twice (a retry after a
// lost ack, or a replay) is counted once.
func TestSpendReportIsIdempotent(t *testing.T) {
	h := newHarness(t)
	h.must(teamCmd("t1", &pb.Budget{LimitNanos: 1e9, Period: PeriodMonth}))
	r := &pb.SpendRollup{HourUnix: recentHour, KeyId: "k1", TeamId: "t1", Model: "m", Requests: 2, PromptTokens: 10, CompletionTokens: 20, CostNanos: 500}
	h.must(reportCmd("n1", 1, TeamBudgetID("t1"), 100, 500, r))
	h.must(reportCmd("n1", 1, TeamBudgetID("t1"), 100, 500, r)) // the same seq again
	h.must(reportCmd("n2", 1, TeamBudgetID("t1"), 100, 500, r)) // another node's first report
	h.must(reportCmd("n1", 2, TeamBudgetID("t1"), 100, 500, r))
	h.must(reportCmd("n1", 1, TeamBudgetID("t1"), 100, 500, r)) // an old one late
	var got []*pb.SpendRollup
	h.state().WalkRollups(0, 1<<40, func(r *pb.SpendRollup) bool { got = append(got, r); return true })
	if len(got) != 1 || got[0].GetRequests() != 6 || got[0].GetCostNanos() != 1500 || got[0].GetCompletionTokens() != 60 {
		t.Fatalf("rollups: %v", got)
	}
	if bp := h.state().BudgetPeriod(TeamBudgetID("t1"), 100); bp.GetSpentNanos() != 1500 {
		t.Fatalf("budget spend: %v", bp)
	}
	if h.state().NodeSeq("n1") != 2 || h.state().NodeSeq("n2") != 1 {
		t.Fatal("node seqs not kept")
	}
	// The rollups are in the snapshot and come back on restore.
	st, err := stateFromSnapshot(snapshotOf(h.state()), nil, DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	var again []*pb.SpendRollup
	st.WalkRollups(0, 1<<40, func(r *pb.SpendRollup) bool { again = append(again, r); return true })
	if len(again) != 1 || again[0].GetCostNanos() != 1500 || st.NodeSeq("n1") != 2 || st.BudgetPeriod(TeamBudgetID("t1"), 100).GetSpentNanos() != 1500 {
		t.Fatalf("restored rollups %v", again)
	}
}

func TestWalkRollupsRange(t *testing.T) {
	h := newHarness(t)
	for i, hour := range []int64{recentHour, recentHour + 3600, recentHour + 7200, recentHour + 10800} {
		h.must(&pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{Node: "n", Seq: uint64(i + 1),
			Rollups: []*pb.SpendRollup{{HourUnix: hour, KeyId: "k", Model: "m", Requests: 1}}}}})
	}
	var hours []int64
	h.state().WalkRollups(recentHour+3600, recentHour+10800, func(r *pb.SpendRollup) bool { hours = append(hours, r.GetHourUnix()); return true })
	if len(hours) != 2 || hours[0] != recentHour+3600 || hours[1] != recentHour+7200 {
		t.Fatalf("hours %v", hours)
	}
}

func TestReleaseAndReturnLeases(t *testing.T) {
	h := newHarness(t)
	h.must(teamCmd("t1", &pb.Budget{LimitNanos: 1000, Period: PeriodTotal}))
	b := TeamBudgetID("t1")
	h.must(grantCmd("a", b, 0, 400), grantCmd("b", b, 0, 400))
	h.must(&pb.Command{Op: &pb.Command_ReleaseNode{ReleaseNode: &pb.ReleaseNodeCommand{Node: "a"}}})
	if l := h.state().BudgetPeriod(b, 0).GetLeases(); l["a"] != 0 || l["b"] != 400 {
		t.Fatalf("after release: %v", l)
	}
	h.must(&pb.Command{Op: &pb.Command_ReturnLease{ReturnLease: &pb.ReturnLeaseCommand{Node: "b", Budget: b}}})
	if v, _ := h.apply(grantCmd("c", b, 0, 5000)); v.(*pb.BudgetPeriod).GetLeases()["c"] != 1000 {
		t.Fatalf("the returned leases are not back in the pool: %v", v)
	}
}

func TestTeams(t *testing.T) {
	h := newHarness(t)
	h.must(teamCmd("t1", nil))
	if _, err := h.apply(teamCmd("t1", nil)); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("duplicate team: %v", err)
	}
	if _, err := h.apply(teamCmd("t2", &pb.Budget{LimitNanos: 0, Period: PeriodDay})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("zero budget: %v", err)
	}
	if _, err := h.apply(teamCmd("t2", &pb.Budget{LimitNanos: 5, Period: "year"})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad period: %v", err)
	}
	k := createKeyCmd("k1", "secret-1")
	k.GetCreateKey().Key.Key.TeamId = "nope"
	if _, err := h.apply(k); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("key in a missing team: %v", err)
	}
	k.GetCreateKey().Key.Key.TeamId = "t1"
	k.GetCreateKey().Key.Key.Budget = &pb.Budget{LimitNanos: 10, Period: PeriodWeek}
	h.must(k)
	kv := h.state().KeyByHash(HashSecret("secret-1"))
	if kv.TeamID != "t1" || kv.Budget == nil || kv.Budget.ID != "key:k1" || kv.Budget.LimitNanos != 10 {
		t.Fatalf("key view %+v", kv)
	}
	if _, err := h.apply(&pb.Command{Op: &pb.Command_DeleteTeam{DeleteTeam: &pb.DeleteTeamCommand{Id: "t1"}}}); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("delete a team with keys: %v", err)
	}
	empty := ""
	h.must(updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", TeamId: &empty, ClearBudget: true}))
	if kv := h.state().KeyByHash(HashSecret("secret-1")); kv.TeamID != "" || kv.Budget != nil {
		t.Fatalf("after update %+v", kv)
	}
	h.must(&pb.Command{Op: &pb.Command_DeleteTeam{DeleteTeam: &pb.DeleteTeamCommand{Id: "t1"}}})
	if h.state().Team("t1") != nil {
		t.Fatal("team still there")
	}
}
