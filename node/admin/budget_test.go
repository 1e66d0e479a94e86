package admin

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

func utc(y int, m time.Month, d int) int64 { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() }

// applyCmd applies a command to the store directly, as a node's budget
// code does.
func applyCmd(t *testing.T, store *raftstore.Store, cmd *pb.Command) proto.Message {
	t.Helper()
	cmd.UnixNanos = time.Now().UnixNano()
	res, err := store.Apply(ctxT(t), cmd)
	if err != nil {
		t.Fatalf("apply %T: %v", cmd.GetOp(), err)
	}
	return res
}

func grantLease(t *testing.T, store *raftstore.Store, node, budget string, start, want int64) int64 {
	t.Helper()
	res := applyCmd(t, store, &pb.Command{Op: &pb.Command_GrantLease{GrantLease: &pb.GrantLeaseCommand{
		Node: node, Budget: budget, PeriodStart: start, WantNanos: want,
	}}})
	return res.(*pb.BudgetPeriod).GetLeases()[node]
}

func reportSpend(t *testing.T, store *raftstore.Store, node string, seq uint64, uses ...*pb.BudgetUse) {
	t.Helper()
	applyCmd(t, store, &pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{
		Node: node, Seq: seq, Budgets: uses,
	}}})
}

func wantStatus(t *testing.T, what string, got, want *pb.BudgetStatus) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s budget status:\n got %v\nwant %v", what, got, want)
	}
}

func TestBudgetStatus(t *testing.T) {
	store := openStore(t)
	// Saturday 31 January 2026, late: the month started on the 1st and
	// resets on 1 February, the week started on Monday the 26th.
	now := time.Date(2026, time.January, 31, 23, 30, 0, 0, time.UTC)
	env := startServerWith(t, Config{Store: store}, func() time.Time { return now })
	ctx := ctxT(t)
	monthStart, monthReset := utc(2026, time.January, 1), utc(2026, time.February, 1)
	weekStart, weekReset := utc(2026, time.January, 26), utc(2026, time.February, 2)

	team, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "t",
		Budget: &pb.Budget{LimitNanos: 20_000_000_000, Period: "week"}})
	mustOK(t, err)
	tid := team.GetTeam().GetId()
	a, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "a", TeamId: tid,
		Budget: &pb.Budget{LimitNanos: 10_000_000_000, Period: "month"}})
	mustOK(t, err)
	aid := a.GetKey().GetId()
	keyBudget, teamBudget := raftstore.KeyBudgetID(aid), raftstore.TeamBudgetID(tid)

	// Nothing granted or spent yet.
	got, err := env.keys.GetKey(ctx, &pb.GetKeyRequest{Id: aid})
	mustOK(t, err)
	wantStatus(t, "key", got.GetBudgetStatus(), &pb.BudgetStatus{LimitNanos: 10_000_000_000, Period: "month",
		PeriodStart: monthStart, ResetAt: monthReset, RemainingNanos: 10_000_000_000})
	wantStatus(t, "team", got.GetTeamBudgetStatus(), &pb.BudgetStatus{LimitNanos: 20_000_000_000, Period: "week",
		PeriodStart: weekStart, ResetAt: weekReset, RemainingNanos: 20_000_000_000})

	// Two nodes lease from the key's budget, one from the team's; n1
	// settles 2 of its 5 against both. Spend reported for last month does
	// not count in this one.
	if g := grantLease(t, store, "n1", keyBudget, monthStart, 5_000_000_000); g != 5_000_000_000 {
		t.Fatalf("n1 granted %d", g)
	}
	if g := grantLease(t, store, "n2", keyBudget, monthStart, 1_000_000_000); g != 1_000_000_000 {
		t.Fatalf("n2 granted %d", g)
	}
	if g := grantLease(t, store, "n1", teamBudget, weekStart, 4_000_000_000); g != 4_000_000_000 {
		t.Fatalf("n1 granted %d of the team budget", g)
	}
	reportSpend(t, store, "n1", 1,
		&pb.BudgetUse{Budget: keyBudget, PeriodStart: monthStart, SpentNanos: 2_000_000_000},
		&pb.BudgetUse{Budget: teamBudget, PeriodStart: weekStart, SpentNanos: 2_000_000_000},
		&pb.BudgetUse{Budget: keyBudget, PeriodStart: utc(2025, time.December, 1), SpentNanos: 7_000_000_000})

	got, err = env.keys.GetKey(ctx, &pb.GetKeyRequest{Id: aid})
	mustOK(t, err)
	wantStatus(t, "key", got.GetBudgetStatus(), &pb.BudgetStatus{LimitNanos: 10_000_000_000, Period: "month",
		PeriodStart: monthStart, ResetAt: monthReset,
		SpentNanos: 2_000_000_000, LeasedNanos: 3_000_000_000 + 1_000_000_000, RemainingNanos: 8_000_000_000})
	teamStatus := &pb.BudgetStatus{LimitNanos: 20_000_000_000, Period: "week", PeriodStart: weekStart, ResetAt: weekReset,
		SpentNanos: 2_000_000_000, LeasedNanos: 2_000_000_000, RemainingNanos: 18_000_000_000}
	wantStatus(t, "team", got.GetTeamBudgetStatus(), teamStatus)

	gt, err := env.teams.GetTeam(ctx, &pb.GetTeamRequest{Id: tid})
	mustOK(t, err)
	wantStatus(t, "GetTeam", gt.GetBudgetStatus(), teamStatus)
	if ids := gt.GetKeyIds(); len(ids) != 1 || ids[0] != aid {
		t.Errorf("key_ids = %v, want [%s]", ids, aid)
	}

	// Overspending (n2 spent more than its lease) leaves nothing, never a
	// negative remainder.
	reportSpend(t, store, "n2", 1, &pb.BudgetUse{Budget: keyBudget, PeriodStart: monthStart, SpentNanos: 9_000_000_000})
	got, err = env.keys.GetKey(ctx, &pb.GetKeyRequest{Id: aid})
	mustOK(t, err)
	wantStatus(t, "overspent key", got.GetBudgetStatus(), &pb.BudgetStatus{LimitNanos: 10_000_000_000, Period: "month",
		PeriodStart: monthStart, ResetAt: monthReset, SpentNanos: 11_000_000_000, LeasedNanos: 3_000_000_000})

	// A total budget has no period: start and reset are 0.
	d, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "d", Budget: &pb.Budget{LimitNanos: 1_000_000_000, Period: "total"}})
	mustOK(t, err)
	grantLease(t, store, "n1", raftstore.KeyBudgetID(d.GetKey().GetId()), 0, 400_000_000)
	got, err = env.keys.GetKey(ctx, &pb.GetKeyRequest{Id: d.GetKey().GetId()})
	mustOK(t, err)
	wantStatus(t, "total", got.GetBudgetStatus(), &pb.BudgetStatus{LimitNanos: 1_000_000_000, Period: "total",
		LeasedNanos: 400_000_000, RemainingNanos: 1_000_000_000})
	if got.GetTeamBudgetStatus() != nil {
		t.Errorf("key without a team has team_budget_status %v", got.GetTeamBudgetStatus())
	}

	// No budget of its own, a team without one: no statuses.
	plain, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "plain"})
	mustOK(t, err)
	for _, team := range []string{"", plain.GetTeam().GetId()} {
		k, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "nobudget", TeamId: team})
		mustOK(t, err)
		got, err = env.keys.GetKey(ctx, &pb.GetKeyRequest{Id: k.GetKey().GetId()})
		mustOK(t, err)
		if got.GetBudgetStatus() != nil || got.GetTeamBudgetStatus() != nil {
			t.Errorf("team %q: key without budgets has statuses %v / %v", team, got.GetBudgetStatus(), got.GetTeamBudgetStatus())
		}
	}
	gt, err = env.teams.GetTeam(ctx, &pb.GetTeamRequest{Id: plain.GetTeam().GetId()})
	mustOK(t, err)
	if gt.GetBudgetStatus() != nil || len(gt.GetKeyIds()) != 1 {
		t.Errorf("GetTeam(plain) = %v", gt)
	}
}

// TestBudgetStatusUsesTheClock checks the real clock: a month budget's
// period is the current UTC calendar month.
func TestBudgetStatusUsesTheClock(t *testing.T) {
	env := startServer(t, openStore(t))
	ctx := ctxT(t)
	k, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "a", Budget: &pb.Budget{LimitNanos: 5, Period: "month"}})
	mustOK(t, err)
	before := time.Now().UTC()
	got, err := env.keys.GetKey(ctx, &pb.GetKeyRequest{Id: k.GetKey().GetId()})
	mustOK(t, err)
	after := time.Now().UTC()
	bs := got.GetBudgetStatus()
	for _, n := range []time.Time{before, after} { // either, should the month turn meanwhile
		if bs.GetPeriodStart() == utc(n.Year(), n.Month(), 1) && bs.GetResetAt() == utc(n.Year(), n.Month()+1, 1) {
			return
		}
	}
	t.Errorf("month budget status %v: period is not the current UTC month (now %s)", bs, after)
}
