package budget_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/node/budget"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// openStore starts a real single-voter Raft store and waits until it leads.
func openStore(t *testing.T) *raftstore.Store {
	t.Helper()
	s, err := raftstore.Open(raftstore.Config{
		Dir: t.TempDir(), NodeID: "raft1", BindAddr: "127.0.0.1:0", Bootstrap: true, LogLevel: "error",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("store not ready: %v", err)
	}
	return s
}

func apply(t testing.TB, s *raftstore.Store, cmd *pb.Command) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Apply(ctx, cmd); err != nil {
		t.Fatalf("apply %T: %v", cmd.GetOp(), err)
	}
}

// createKey stores a key (optionally in a team) with a budget and returns
// its budget as the data plane sees it.
func createKey(t *testing.T, s *raftstore.Store, id, team string, limit int64, period string) *raftstore.Limit {
	t.Helper()
	h := sha256.Sum256([]byte("secret-" + id))
	k := &pb.Key{Id: id, Name: id, TeamId: team}
	if limit > 0 {
		k.Budget = &pb.Budget{LimitNanos: limit, Period: period}
	}
	apply(t, s, &pb.Command{Op: &pb.Command_CreateKey{CreateKey: &pb.CreateKeyCommand{Key: &pb.StoredKey{Key: k, SecretHash: h[:]}}}})
	l := s.State().BudgetLimit(raftstore.KeyBudgetID(id))
	if limit > 0 && (l == nil || l.LimitNanos != limit || l.Period != period) {
		t.Fatalf("key %s has budget %+v, want %d per %s", id, l, limit, period)
	}
	return l
}

func createTeam(t *testing.T, s *raftstore.Store, id string, limit int64, period string) *raftstore.Limit {
	t.Helper()
	apply(t, s, &pb.Command{Op: &pb.Command_CreateTeam{CreateTeam: &pb.CreateTeamCommand{Team: &pb.Team{
		Id: id, Name: id, Budget: &pb.Budget{LimitNanos: limit, Period: period}}}}})
	l := s.State().BudgetLimit(raftstore.TeamBudgetID(id))
	if l == nil || l.LimitNanos != limit {
		t.Fatalf("team %s has budget %+v", id, l)
	}
	return l
}

func newManager(s *raftstore.Store, node string, wait time.Duration) *budget.Manager {
	return budget.New(budget.Config{NodeID: node, State: s, GrantWait: wait,
		Propose: func(ctx context.Context, cmd *pb.Command) error {
			_, err := s.Apply(ctx, cmd)
			return err
		}})
}

// reporter plays a node's ledger and spend report loop: it collects what
// the node settled and reports it into Raft with increasing seqs, then
// tells the manager.
type reporter struct {
	s    *raftstore.Store
	m    *budget.Manager
	node string
	mu   sync.Mutex
	seq  uint64
	acc  map[[2]any]int64 // (budget, period start) -> settled, not reported
}

func newReporter(s *raftstore.Store, m *budget.Manager, node string) *reporter {
	return &reporter{s: s, m: m, node: node, acc: map[[2]any]int64{}}
}

// settle settles r at cost in the manager, then records the spend (the
// node settles before the ledger append, too).
func (rp *reporter) settle(r *budget.Reservation, cost int64) {
	rp.m.Settle(r, cost)
	rp.mu.Lock()
	for _, u := range r.Uses(cost) {
		rp.acc[[2]any{u.GetBudget(), u.GetPeriodStart()}] += u.GetSpentNanos()
	}
	rp.mu.Unlock()
}

// flush reports everything settled so far.
func (rp *reporter) flush(t testing.TB) {
	rp.mu.Lock()
	var uses []*pb.BudgetUse
	for k, n := range rp.acc {
		if n != 0 {
			uses = append(uses, &pb.BudgetUse{Budget: k[0].(string), PeriodStart: k[1].(int64), SpentNanos: n})
		}
	}
	clear(rp.acc)
	rp.mu.Unlock()
	if len(uses) == 0 {
		return
	}
	rp.seq++
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := rp.s.Apply(ctx, &pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{
		Node: rp.node, Seq: rp.seq, Budgets: uses}}}); err != nil {
		t.Errorf("spend report of %s: %v", rp.node, err)
		return
	}
	rp.m.Reported(uses)
}

func period(t *testing.T, s *raftstore.Store, l *raftstore.Limit, start int64) *pb.BudgetPeriod {
	t.Helper()
	bp := s.State().BudgetPeriod(l.ID, start)
	if bp == nil {
		t.Fatalf("no accounting of %s in period %d", l.ID, start)
	}
	return bp
}

func leaseSum(bp *pb.BudgetPeriod) int64 {
	var sum int64
	for _, l := range bp.GetLeases() {
		sum += l
	}
	return sum
}

func asExceeded(t *testing.T, err error) *budget.Exceeded {
	t.Helper()
	var ex *budget.Exceeded
	if !errors.As(err, &ex) {
		t.Fatalf("got error %v (%T), want *budget.Exceeded", err, err)
	}
	return ex
}

func TestReserveSettleWithinBudget(t *testing.T) {
	s := openStore(t)
	lim := createKey(t, s, "k1", "", 1_000_000, raftstore.PeriodMonth)
	m := newManager(s, "n1", time.Second)
	ctx := context.Background()
	now := time.Now()
	start := raftstore.PeriodStart(raftstore.PeriodMonth, now)

	r, err := m.Reserve(ctx, []*raftstore.Limit{lim}, 100_000, now)
	if err != nil || r == nil {
		t.Fatalf("Reserve: %v, %v", r, err)
	}
	bp := period(t, s, lim, start)
	lease := bp.GetLeases()["n1"]
	if lease < 100_000 || bp.GetSpentNanos()+leaseSum(bp) > lim.LimitNanos {
		t.Fatalf("after the first reservation: lease %d, spent %d, leases %d of %d", lease, bp.GetSpentNanos(), leaseSum(bp), lim.LimitNanos)
	}
	uses := r.Uses(60_000)
	if len(uses) != 1 || uses[0].GetBudget() != "key:k1" || uses[0].GetPeriodStart() != start || uses[0].GetSpentNanos() != 60_000 {
		t.Fatalf("Uses(60000) = %v", uses)
	}
	m.Settle(r, 60_000)
	m.Settle(nil, 5) // no reservation: nothing happens

	// No budget: no reservation and no error.
	if r, err := m.Reserve(ctx, nil, 1, now); r != nil || err != nil {
		t.Fatalf("Reserve without budgets = %v, %v", r, err)
	}
	if u := (*budget.Reservation)(nil).Uses(1); u != nil {
		t.Fatalf("nil reservation uses %v", u)
	}

	// Within the lease: no further lease request.
	idx := s.State().Index
	for range 3 {
		r, err := m.Reserve(ctx, []*raftstore.Limit{lim}, 10_000, now)
		if err != nil {
			t.Fatal(err)
		}
		m.Settle(r, 10_000)
	}
	if got := s.State().Index; got != idx && lease >= 200_000 {
		t.Errorf("reservations within the lease went through Raft (index %d -> %d)", idx, got)
	}
	// Total settled 90 000: reserving the rest of the budget still works.
	r, err = m.Reserve(ctx, []*raftstore.Limit{lim}, lim.LimitNanos-90_000, now)
	if err != nil {
		t.Fatalf("reserving exactly what is left: %v", err)
	}
	m.Settle(r, 0)
	bp = period(t, s, lim, start)
	if bp.GetSpentNanos()+leaseSum(bp) > lim.LimitNanos {
		t.Fatalf("spent %d + leases %d exceed the limit %d", bp.GetSpentNanos(), leaseSum(bp), lim.LimitNanos)
	}
}

func TestExceeded(t *testing.T) {
	s := openStore(t)
	lim := createKey(t, s, "k1", "", 10_000, raftstore.PeriodMonth)
	m := newManager(s, "n1", time.Second)
	rp := newReporter(s, m, "n1")
	ctx := context.Background()
	now := time.Now()
	start := raftstore.PeriodStart(raftstore.PeriodMonth, now)
	reset := time.Date(now.UTC().Year(), now.UTC().Month()+1, 1, 0, 0, 0, 0, time.UTC).Unix()

	// More than the whole budget: refused at once.
	t0 := time.Now()
	_, err := m.Reserve(ctx, []*raftstore.Limit{lim}, 10_001, now)
	ex := asExceeded(t, err)
	if ex.Budget == nil || ex.Budget.ID != "key:k1" || ex.Budget.LimitNanos != 10_000 || ex.PeriodStart != start ||
		ex.ResetAt != reset || ex.SpentNanos != 0 {
		t.Fatalf("Exceeded = %+v (budget %+v), want key:k1, start %d, reset %d, spent 0", ex, ex.Budget, start, reset)
	}
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Errorf("an impossible reservation took %v to refuse", d)
	}
	if ex.Error() == "" {
		t.Error("empty error text")
	}

	r, err := m.Reserve(ctx, []*raftstore.Limit{lim}, 6_000, now)
	if err != nil {
		t.Fatal(err)
	}
	rp.settle(r, 6_000)
	// 4 000 are left: 5 000 do not fit; the unreported 6 000 count as spent.
	_, err = m.Reserve(ctx, []*raftstore.Limit{lim}, 5_000, now)
	if ex = asExceeded(t, err); ex.SpentNanos != 6_000 || ex.ResetAt != reset || ex.Budget.ID != "key:k1" {
		t.Fatalf("Exceeded = %+v, want spent 6000 (unreported) and reset %d", ex, reset)
	}
	// Once reported, the spend comes from Raft: the same figure.
	rp.flush(t)
	if bp := period(t, s, lim, start); bp.GetSpentNanos() != 6_000 || bp.GetLeases()["n1"] != 4_000 {
		t.Fatalf("after the report: spent %d, lease %d; want 6000 and 4000", bp.GetSpentNanos(), bp.GetLeases()["n1"])
	}
	_, err = m.Reserve(ctx, []*raftstore.Limit{lim}, 5_000, now)
	if ex = asExceeded(t, err); ex.SpentNanos != 6_000 {
		t.Fatalf("after the report: Exceeded.SpentNanos = %d, want 6000", ex.SpentNanos)
	}
	r, err = m.Reserve(ctx, []*raftstore.Limit{lim}, 4_000, now)
	if err != nil {
		t.Fatalf("the 4000 left: %v", err)
	}
	rp.settle(r, 4_000)
	rp.flush(t)
	_, err = m.Reserve(ctx, []*raftstore.Limit{lim}, 1, now)
	if ex = asExceeded(t, err); ex.SpentNanos != 10_000 {
		t.Fatalf("spent all: Exceeded.SpentNanos = %d", ex.SpentNanos)
	}

	// A total budget never resets.
	tot := createKey(t, s, "k2", "", 1_000, raftstore.PeriodTotal)
	_, err = m.Reserve(ctx, []*raftstore.Limit{tot}, 2_000, now)
	if ex = asExceeded(t, err); ex.ResetAt != 0 || ex.PeriodStart != 0 || ex.Budget.ID != "key:k2" {
		t.Fatalf("total budget: Exceeded = %+v", ex)
	}
}

// TestManyNodesNeverOverdraw runs three managers (three nodes) on one store
// with 64 goroutines reserving and settling random real costs up to the
// estimate until refused, while each node reports its spend now and then.
func TestManyNodesNeverOverdraw(t *testing.T) {
	s := openStore(t)
	const limit, estimate = 20_000_000, 100_000
	lim := createKey(t, s, "k1", "", limit, raftstore.PeriodTotal)
	nodes := []string{"n1", "n2", "n3"}
	var reps []*reporter
	for _, id := range nodes {
		reps = append(reps, newReporter(s, newManager(s, id, 2*time.Second), id))
	}

	stop := make(chan struct{})
	var bg sync.WaitGroup
	var violations atomic.Int64
	// The state machine's invariant, observed continuously.
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			if bp := s.State().BudgetPeriod(lim.ID, 0); bp != nil && bp.GetSpentNanos()+leaseSum(bp) > limit {
				violations.Add(1)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for _, rp := range reps {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
				}
				rp.flush(t)
			}
		}()
	}

	var settled, admitted, refused, spurious atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		rp := reps[g%len(reps)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := rp.m.Reserve(context.Background(), []*raftstore.Limit{lim}, estimate, time.Now())
				if err != nil {
					var ex *budget.Exceeded
					if !errors.As(err, &ex) {
						t.Errorf("Reserve: %v", err)
					}
					refused.Add(1)
					// What no node holds only shrinks here (nothing returns
					// or releases leases), so if an estimate of it is still
					// unleased now, it was when the request was refused:
					// a lease request would have covered it.
					if bp := s.State().BudgetPeriod(lim.ID, 0); bp != nil {
						if free := limit - bp.GetSpentNanos() - leaseSum(bp); free >= estimate {
							spurious.Add(1)
							t.Logf("%s refused a request while %d nano-dollars were not leased to any node", rp.node, free)
						}
					}
					return
				}
				admitted.Add(1)
				if rand.IntN(4) == 0 {
					time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				}
				cost := rand.Int64N(estimate + 1)
				if settled.Add(cost) > limit {
					t.Errorf("settled spend %d is over the limit %d", settled.Load(), limit)
				}
				rp.settle(r, cost)
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	for _, rp := range reps {
		rp.flush(t)
	}

	bp := period(t, s, lim, 0)
	t.Logf("admitted %d, refused %d; settled %d of %d (%.1f%%); leases left %v",
		admitted.Load(), refused.Load(), bp.GetSpentNanos(), int64(limit), 100*float64(bp.GetSpentNanos())/limit, bp.GetLeases())
	if v := violations.Load(); v > 0 {
		t.Errorf("spent + leases exceeded the limit in %d observed states", v)
	}
	if bp.GetSpentNanos() != settled.Load() {
		t.Errorf("Raft counts %d spent, the nodes settled %d", bp.GetSpentNanos(), settled.Load())
	}
	if bp.GetSpentNanos() > limit {
		t.Errorf("spent %d over the limit %d", bp.GetSpentNanos(), int64(limit))
	}
	if bp.GetSpentNanos()+leaseSum(bp) > limit {
		t.Errorf("spent %d + leases %d over the limit %d", bp.GetSpentNanos(), leaseSum(bp), int64(limit))
	}
	if n := spurious.Load(); n > 0 {
		t.Errorf("%d of %d refusals happened while the budget still had an estimate's worth unleased", n, refused.Load())
	}
	// Nothing is left outside the leases once requests were refused.
	if free := limit - bp.GetSpentNanos() - leaseSum(bp); free != 0 {
		t.Errorf("%d nano-dollars neither spent nor leased after every request was refused", free)
	}
}

// TestRestoreAndReported: spend restored from the ledger counts against the
// lease until Raft has it; Reported then stops counting it twice.
func TestRestoreAndReported(t *testing.T) {
	s := openStore(t)
	lim := createKey(t, s, "k1", "", 10_000, raftstore.PeriodTotal)
	ctx := context.Background()
	now := time.Now()
	limits := []*raftstore.Limit{lim}

	m := newManager(s, "n1", time.Second)
	m.Restore([]*pb.BudgetUse{{Budget: lim.ID, PeriodStart: 0, SpentNanos: 7_000}})
	_, err := m.Reserve(ctx, limits, 4_000, now)
	if ex := asExceeded(t, err); ex.SpentNanos != 7_000 {
		t.Fatalf("restored spend: Exceeded.SpentNanos = %d, want 7000", ex.SpentNanos)
	}
	r, err := m.Reserve(ctx, limits, 2_000, now)
	if err != nil {
		t.Fatalf("2000 of the 3000 left: %v", err)
	}
	m.Settle(r, 2_000) // unreported now 9 000

	// The restored 7 000 reach Raft: the lease shrinks by them. Until the
	// manager is told, it counts them twice and admits nothing.
	apply(t, s, &pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{
		Node: "n1", Seq: 1, Budgets: []*pb.BudgetUse{{Budget: lim.ID, SpentNanos: 7_000}}}}})
	if bp := period(t, s, lim, 0); bp.GetSpentNanos() != 7_000 || bp.GetLeases()["n1"] != 3_000 {
		t.Fatalf("after the report: spent %d, lease %d", bp.GetSpentNanos(), bp.GetLeases()["n1"])
	}
	if _, err := m.Reserve(ctx, limits, 1_000, now); err == nil {
		t.Fatal("reserved while reported spend was still counted as unreported too")
	}
	m.Reported([]*pb.BudgetUse{{Budget: lim.ID, SpentNanos: 7_000}})
	r, err = m.Reserve(ctx, limits, 1_000, now)
	if err != nil {
		t.Fatalf("after Reported, the last 1000: %v", err)
	}
	m.Settle(r, 1_000)
	if _, err := m.Reserve(ctx, limits, 1, now); err == nil {
		t.Fatal("reserved beyond the limit")
	}

	// Restored spend of a node without a lease: once Raft has it and the
	// manager is told, nothing is held back twice.
	lim2 := createKey(t, s, "k2", "", 5_000, raftstore.PeriodTotal)
	m3 := newManager(s, "n3", time.Second)
	m3.Restore([]*pb.BudgetUse{{Budget: lim2.ID, SpentNanos: 1_000}})
	apply(t, s, &pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{
		Node: "n3", Seq: 1, Budgets: []*pb.BudgetUse{{Budget: lim2.ID, SpentNanos: 1_000}}}}})
	if bp := period(t, s, lim2, 0); bp.GetSpentNanos() != 1_000 {
		t.Fatalf("k2 spent %d after the report", bp.GetSpentNanos())
	}
	m3.Reported([]*pb.BudgetUse{{Budget: lim2.ID, SpentNanos: 1_000}})
	r, err = m3.Reserve(ctx, []*raftstore.Limit{lim2}, 4_000, now)
	if err != nil {
		t.Fatalf("the 4000 left after reported spend: %v", err)
	}
	m3.Settle(r, 0)
}

// TestKeyAndTeamAllOrNothing: a request reserves in both its key's and its
// team's budget, or in neither.
func TestKeyAndTeamAllOrNothing(t *testing.T) {
	s := openStore(t)
	team := createTeam(t, s, "t1", 10_000, raftstore.PeriodTotal)
	k1 := createKey(t, s, "k1", "t1", 10_000, raftstore.PeriodTotal)
	createKey(t, s, "k0", "t1", 0, "") // no budget of its own
	ctx := context.Background()
	now := time.Now()
	m := newManager(s, "n1", time.Second)

	// k0 takes 8 000 of the team.
	r0, err := m.Reserve(ctx, []*raftstore.Limit{team}, 8_000, now)
	if err != nil {
		t.Fatal(err)
	}
	// k1's 5 000 fit its key budget but not the team's: refused, naming the
	// team, and nothing held in the key budget.
	for _, order := range [][]*raftstore.Limit{{k1, team}, {team, k1}} {
		_, err = m.Reserve(ctx, order, 5_000, now)
		if ex := asExceeded(t, err); ex.Budget.ID != team.ID {
			t.Fatalf("refused by %s, want %s", ex.Budget.ID, team.ID)
		}
	}
	r, err := m.Reserve(ctx, []*raftstore.Limit{k1}, 10_000, now)
	if err != nil {
		t.Fatalf("the whole key budget after two refusals: %v (a refused reservation held part of it)", err)
	}
	m.Settle(r, 0)

	// Both fit: both are charged with the real cost.
	r, err = m.Reserve(ctx, []*raftstore.Limit{k1, team}, 2_000, now)
	if err != nil {
		t.Fatal(err)
	}
	uses := r.Uses(1_500)
	if len(uses) != 2 || uses[0].GetBudget() != k1.ID || uses[1].GetBudget() != team.ID ||
		uses[0].GetSpentNanos() != 1_500 || uses[1].GetSpentNanos() != 1_500 {
		t.Fatalf("Uses = %v", uses)
	}
	m.Settle(r, 1_500)
	m.Settle(r0, 8_000)
	// Team: 9 500 spent, 500 left. Key: 1 500 spent.
	if _, err := m.Reserve(ctx, []*raftstore.Limit{team}, 501, now); err == nil {
		t.Fatal("team reserved 501 with 500 left")
	}
	if r, err = m.Reserve(ctx, []*raftstore.Limit{k1}, 8_500, now); err != nil {
		t.Fatalf("key: the 8500 left: %v", err)
	}
	m.Settle(r, 0)
	if r, err = m.Reserve(ctx, []*raftstore.Limit{team, k1}, 500, now); err != nil {
		t.Fatalf("both: the team's last 500: %v", err)
	}
	m.Settle(r, 500)
}

// TestGrantWait: a node whose lease is short waits at most GrantWait for
// more; an exhausted budget is refused at once.
func TestGrantWait(t *testing.T) {
	s := openStore(t)
	lim := createKey(t, s, "k1", "", 1_000_000, raftstore.PeriodTotal)
	const wait = 300 * time.Millisecond
	ctx := context.Background()

	// The leader cannot be reached: every lease request hangs until its
	// context ends.
	var inFlight, most atomic.Int64
	stalled := budget.New(budget.Config{NodeID: "n1", State: s, GrantWait: wait,
		Propose: func(ctx context.Context, _ *pb.Command) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-ctx.Done()
			return ctx.Err()
		}})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	took := make([]time.Duration, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			_, errs[i] = stalled.Reserve(ctx, []*raftstore.Limit{lim}, 1_000, time.Now())
			took[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	// No lease can be granted: the budget has money left, so they overdraw
	// (8 000 of the 31 250 allowed) after waiting about GrantWait.
	for i, err := range errs {
		if err != nil {
			t.Fatalf("reservation %d refused while the budget has money left: %v", i, err)
		}
		// At least GrantWait (less a timer's slack); the upper bound only
		// catches a wait without end, not a slow machine.
		if took[i] < wait*8/10 || took[i] > wait+20*time.Second {
			t.Errorf("reservation %d waited %v for a lease, want about GrantWait (%v)", i, took[i], wait)
		}
	}
	if n := most.Load(); n != 1 {
		t.Errorf("%d concurrent lease requests for one budget, want 1", n)
	}

	// A cancelled request does not wait, and does not overdraw: with a
	// GrantWait longer than the test's timeout, only a request that does
	// not wait for it returns at all.
	hung := budget.New(budget.Config{NodeID: "n4", State: s, GrantWait: time.Hour,
		Propose: func(ctx context.Context, _ *pb.Command) error { <-ctx.Done(); return ctx.Err() }})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := hung.Reserve(cctx, []*raftstore.Limit{lim}, 1_000, time.Now()); err == nil {
		t.Fatal("reserved with a cancelled context and no lease")
	}

	// Exhausted: refused without waiting out GrantWait.
	// GrantWait longer than the test's timeout: a refusal that returns at
	// all did not wait for it.
	m := newManager(s, "n2", time.Hour)
	r, err := m.Reserve(ctx, []*raftstore.Limit{lim}, lim.LimitNanos, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m.Settle(r, lim.LimitNanos)
	m3 := newManager(s, "n3", time.Hour)
	for _, mm := range []*budget.Manager{m, m3} {
		_, err := mm.Reserve(ctx, []*raftstore.Limit{lim}, 1, time.Now())
		asExceeded(t, err)
	}
}

// TestPeriodsAreSeparate: a month budget spent out in one month starts
// afresh in the next.
func TestPeriodsAreSeparate(t *testing.T) {
	s := openStore(t)
	lim := createKey(t, s, "k1", "", 1_000, raftstore.PeriodMonth)
	m := newManager(s, "n1", time.Second)
	ctx := context.Background()
	jan := time.Date(2031, 1, 31, 23, 0, 0, 0, time.UTC)
	feb := time.Date(2031, 2, 1, 1, 0, 0, 0, time.UTC)
	r, err := m.Reserve(ctx, []*raftstore.Limit{lim}, 1_000, jan)
	if err != nil {
		t.Fatal(err)
	}
	m.Settle(r, 1_000)
	_, err = m.Reserve(ctx, []*raftstore.Limit{lim}, 1, jan)
	if ex := asExceeded(t, err); ex.ResetAt != feb.Add(-time.Hour).Unix() {
		t.Fatalf("January resets at %s, want %s", time.Unix(ex.ResetAt, 0).UTC(), feb.Add(-time.Hour))
	}
	if r, err = m.Reserve(ctx, []*raftstore.Limit{lim}, 1_000, feb); err != nil {
		t.Fatalf("February: %v", err)
	}
	if got := fmt.Sprint(r.Uses(1)[0].GetPeriodStart()); got != fmt.Sprint(feb.Add(-time.Hour).Unix()) {
		t.Fatalf("February reservation in period %s", got)
	}
	m.Settle(r, 1)
}

// TestLeaseRequestRacingReport: the node's spend report lands while one of
// its lease requests is in flight. The report shrinks the node's lease by
// its spend, the grant adds less than that, and the request must still be
// served: the budget has room, and after the report the lease covers it.
func TestLeaseRequestRacingReport(t *testing.T) {
	s := openStore(t)
	lim := createKey(t, s, "k1", "", 1_000_000, raftstore.PeriodTotal)
	ctx := context.Background()
	limits := []*raftstore.Limit{lim}
	var m *budget.Manager
	var rp *reporter
	var inject atomic.Bool
	m = budget.New(budget.Config{NodeID: "n1", State: s, GrantWait: time.Second, NoRenewAhead: true,
		Propose: func(ctx context.Context, cmd *pb.Command) error {
			if cmd.GetGrantLease() != nil && inject.CompareAndSwap(true, false) {
				rp.flush(t) // the report loop's tick: applied, acknowledged, Reported
			}
			_, err := s.Apply(ctx, cmd)
			return err
		}})
	rp = newReporter(s, m, "n1")

	// n1 leases 400 000 and spends 390 000 of it (not yet reported); n2
	// leases 500 000: 100 000 are left unleased.
	r, err := m.Reserve(ctx, limits, 100_000, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rp.settle(r, 390_000-300_000)
	for range 3 {
		r, err := m.Reserve(ctx, limits, 100_000, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rp.settle(r, 100_000)
	}
	apply(t, s, &pb.Command{Op: &pb.Command_GrantLease{GrantLease: &pb.GrantLeaseCommand{
		Node: "n2", Budget: lim.ID, WantNanos: 500_000}}})
	bp := period(t, s, lim, 0)
	if bp.GetLeases()["n1"] != 400_000 || bp.GetLeases()["n2"] != 500_000 {
		t.Fatalf("setup: leases %v", bp.GetLeases())
	}

	// 50 000 more: n1's lease has 10 000 free, so it asks for more; its
	// report of 390 000 lands first, then 100 000 are granted.
	inject.Store(true)
	r, err = m.Reserve(ctx, limits, 50_000, time.Now())
	bp = period(t, s, lim, 0)
	t.Logf("after the race: spent %d, leases %v", bp.GetSpentNanos(), bp.GetLeases())
	if err != nil {
		t.Fatalf("refused although n1's lease now has %d free of %d: %v (the lease request counted as "+
			"'nothing granted' because the concurrent report shrank the lease more than the grant grew it)",
			bp.GetLeases()["n1"], lim.LimitNanos, err)
	}
	m.Settle(r, 0)
}
