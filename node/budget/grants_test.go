package budget_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/node/budget"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// grantsIn returns how many lease requests cmd carries.
func grantsIn(cmd *pb.Command) int {
	if gl := cmd.GetGrantLeases(); gl != nil {
		return len(gl.GetGrants())
	}
	if cmd.GetGrantLease() != nil {
		return 1
	}
	return 0
}

// holdFirst holds the first proposal until total lease requests are in it
// or queued behind it.
func holdFirst(m **budget.Manager, first *bool, cmd *pb.Command, total int) {
	if !*first {
		return
	}
	*first = false
	for grantsIn(cmd)+(*m).QueuedGrants() < total {
		time.Sleep(time.Millisecond)
	}
}

// reserveAll reserves amount of each budget at once, one goroutine per
// budget, and returns their errors.
func reserveAll(m *budget.Manager, limits []*raftstore.Limit, amount int64) []error {
	errs := make([]error, len(limits))
	var wg sync.WaitGroup
	for i, lim := range limits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.Reserve(context.Background(), []*raftstore.Limit{lim}, amount, time.Now())
		}()
	}
	wg.Wait()
	return errs
}

// TestLeaseRequestsOfManyBudgetsShareEntries: budgets that all need a
// lease at once are granted through a few Raft entries, not one each. The
// first request goes alone; the others queue behind it and go as one
// GrantLeases entry.
func TestLeaseRequestsOfManyBudgetsShareEntries(t *testing.T) {
	s := openStore(t)
	const n = 300 // more than one batch holds
	limits := make([]*raftstore.Limit, n)
	for i := range limits {
		limits[i] = createKey(t, s, fmt.Sprintf("k%03d", i), "", 1_000_000, raftstore.PeriodTotal)
	}
	var m *budget.Manager
	var calls, grants atomic.Int64
	first := true
	m = budget.New(budget.Config{NodeID: "n1", State: s, GrantWait: 10 * time.Second, NoRenewAhead: true,
		ProposeResult: func(ctx context.Context, cmd *pb.Command) (proto.Message, error) {
			calls.Add(1)
			grants.Add(int64(grantsIn(cmd)))
			holdFirst(&m, &first, cmd, n)
			return s.Apply(ctx, cmd)
		}})
	before := s.State().Index
	for i, err := range reserveAll(m, limits, 1_000) {
		if err != nil {
			t.Fatalf("reservation of budget %d: %v", i, err)
		}
	}
	entries := s.State().Index - before
	t.Logf("%d budgets leased through %d proposals, %d Raft entries", n, calls.Load(), entries)
	if most := int64(1 + (n-1+budget.MaxGrantBatch-1)/budget.MaxGrantBatch); calls.Load() > most {
		t.Errorf("%d proposals for %d budgets, want at most %d", calls.Load(), n, most)
	}
	if entries != uint64(calls.Load()) {
		t.Errorf("%d Raft entries for %d proposals", entries, calls.Load())
	}
	if grants.Load() != n {
		t.Errorf("%d lease requests proposed for %d budgets", grants.Load(), n)
	}
	for _, lim := range limits {
		if got := period(t, s, lim, 0).GetLeases()["n1"]; got != 31_250 {
			t.Fatalf("budget %s: lease %d, want 31 250", lim.ID, got)
		}
	}
}

// TestBatchedGrantFailuresArePerGrant: a grant in a batch that fails (its
// budget is gone) fails only its own request.
func TestBatchedGrantFailuresArePerGrant(t *testing.T) {
	s := openStore(t)
	ok1 := createKey(t, s, "k1", "", 1_000_000, raftstore.PeriodTotal)
	ok2 := createKey(t, s, "k2", "", 1_000_000, raftstore.PeriodTotal)
	gone := &raftstore.Limit{ID: raftstore.KeyBudgetID("nokey"), LimitNanos: 1_000_000, Period: raftstore.PeriodTotal}
	limits := []*raftstore.Limit{ok1, ok2, gone}
	var m *budget.Manager
	var batched atomic.Int64
	first := true
	m = budget.New(budget.Config{NodeID: "n1", State: s, GrantWait: 300 * time.Millisecond, NoRenewAhead: true,
		ProposeResult: func(ctx context.Context, cmd *pb.Command) (proto.Message, error) {
			holdFirst(&m, &first, cmd, len(limits))
			if cmd.GetGrantLeases() != nil {
				batched.Add(1)
			}
			return s.Apply(ctx, cmd)
		}})
	errs := reserveAll(m, limits, 1_000)
	if batched.Load() == 0 {
		t.Fatal("no GrantLeases entry was proposed")
	}
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("grants of existing budgets failed with one of a missing budget: %v, %v", errs[0], errs[1])
	}
	// The missing budget's grant failed: with no lease the request
	// overdraws (the limit it was handed has money left) or fails; either
	// way it got no lease.
	if bp := s.State().BudgetPeriod(gone.ID, 0); bp != nil {
		t.Fatalf("a lease of a missing budget: %v", bp)
	}
}

// TestBatchRefusedFallsBackToSingleGrants: while the leader refuses
// GrantLeases (a member of an older release), the requests of a refused
// batch, and those queued behind it, are proposed one by one.
func TestBatchRefusedFallsBackToSingleGrants(t *testing.T) {
	s := openStore(t)
	const n = 1 + budget.MaxGrantBatch + 10 // one alone, then a full batch and a rest
	limits := make([]*raftstore.Limit, n)
	for i := range limits {
		limits[i] = createKey(t, s, fmt.Sprintf("k%03d", i), "", 1_000_000, raftstore.PeriodTotal)
	}
	s.SetProposeGate(func(name string) error {
		if name == "grant_leases" {
			return errors.New("node n9 runs an older release")
		}
		return nil
	})
	var m *budget.Manager
	var refused, singles atomic.Int64
	firstCalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	m = budget.New(budget.Config{NodeID: "n1", State: s, GrantWait: 10 * time.Second, NoRenewAhead: true,
		ProposeResult: func(ctx context.Context, cmd *pb.Command) (proto.Message, error) {
			once.Do(func() { close(firstCalled); <-release })
			res, err := s.Apply(ctx, cmd)
			switch {
			case errors.Is(err, raftstore.ErrCommandRefused):
				refused.Add(1)
			case cmd.GetGrantLease() != nil:
				singles.Add(1)
			}
			return res, err
		}})
	errs := make(chan error, n)
	go func() { errs <- reserveAll(m, limits[:1], 1_000)[0] }()
	<-firstCalled // the first request is on its way, alone
	go func() {
		for _, err := range reserveAll(m, limits[1:], 1_000) {
			errs <- err
		}
	}()
	for m.QueuedGrants() < n-1 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("reservation with GrantLeases refused: %v", err)
		}
	}
	if refused.Load() != 1 || singles.Load() != n {
		t.Fatalf("%d refused batches and %d single grants, want 1 and %d", refused.Load(), singles.Load(), n)
	}
	for _, lim := range limits {
		if got := period(t, s, lim, 0).GetLeases()["n1"]; got != 31_250 {
			t.Fatalf("budget %s: lease %d, want 31 250", lim.ID, got)
		}
	}
}
