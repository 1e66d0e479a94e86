package budget_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/node/budget"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// A lease that runs below its low-water mark is topped up in the
// background, before a request finds it short.
func TestLeaseRenewedBeforeItRunsDry(t *testing.T) {
	s := openStore(t)
	lim := createKey(t, s, "k1", "", 10_000_000, raftstore.PeriodTotal)
	m := newManager(s, "n1", 2*time.Second)
	ctx := context.Background()
	limits := []*raftstore.Limit{lim}

	r, err := m.Reserve(ctx, limits, 100_000, time.Now()) // asks for 400 000
	if err != nil {
		t.Fatal(err)
	}
	m.Settle(r, 100_000)
	if got := period(t, s, lim, 0).GetLeases()["n1"]; got != 400_000 {
		t.Fatalf("first lease %d, want 400 000", got)
	}
	// 150 000 more leaves 150 000 free, below half of a 600 000 request.
	if _, err := m.Reserve(ctx, limits, 150_000, time.Now()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for period(t, s, lim, 0).GetLeases()["n1"] <= 400_000 {
		if time.Now().After(deadline) {
			t.Fatalf("lease still %d: not renewed below the low-water mark", period(t, s, lim, 0).GetLeases()["n1"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// While no lease can be granted (no leader), a node keeps admitting: from
// its lease, then beyond it by at most budget.OverdraftBound; a budget
// that has nothing left is still refused as exceeded.
func TestNoLeaderOverdrawsWithinBound(t *testing.T) {
	s := openStore(t)
	lim := createKey(t, s, "k1", "", 1_000_000, raftstore.PeriodTotal)
	var noLeader atomic.Bool
	m := budget.New(budget.Config{NodeID: "n1", State: s, GrantWait: time.Second, NoRenewAhead: true,
		Propose: func(ctx context.Context, cmd *pb.Command) error {
			if noLeader.Load() {
				return fmt.Errorf("propose: %w", raftstore.ErrNotLeader)
			}
			_, err := s.Apply(ctx, cmd)
			return err
		}})
	ctx := context.Background()
	limits := []*raftstore.Limit{lim}
	reserve := func(amount int64) error {
		_, err := m.Reserve(ctx, limits, amount, time.Now())
		return err
	}
	if err := reserve(10_000); err != nil { // a lease of 40 000
		t.Fatal(err)
	}
	noLeader.Store(true)
	bound := budget.OverdraftBound(lim, 0) // 31 250
	for i, amount := range []int64{30_000, 20_000, 10_000} {
		if err := reserve(amount); err != nil {
			t.Fatalf("reservation %d of %d refused with no leader and money left: %v", i, amount, err)
		}
	}
	// 30 000 beyond the lease now; 5 000 more would pass the bound.
	err := reserve(5_000)
	var ex *budget.Exceeded
	if err == nil || errors.As(err, &ex) {
		t.Fatalf("overdraft past the bound %d: %v, want a lease error", bound, err)
	}

	// A request of any size may start within the lease.
	big := createKey(t, s, "k2", "", 1_000_000, raftstore.PeriodTotal)
	noLeader.Store(false)
	if _, err := m.Reserve(ctx, []*raftstore.Limit{big}, 1_000, time.Now()); err != nil {
		t.Fatal(err)
	}
	noLeader.Store(true)
	if _, err := m.Reserve(ctx, []*raftstore.Limit{big}, 200_000, time.Now()); err != nil {
		t.Fatalf("one large request within the lease refused: %v", err)
	}
	if _, err := m.Reserve(ctx, []*raftstore.Limit{big}, 1_000, time.Now()); err == nil {
		t.Fatal("admitted more after a large overdraft")
	}
}

// A budget spent out as replicated is refused as exceeded, leader or not.
func TestNoLeaderExhaustedBudgetRefused(t *testing.T) {
	s := openStore(t)
	lim := createKey(t, s, "k1", "", 100_000, raftstore.PeriodTotal)
	m := newManager(s, "n1", time.Second)
	rp := newReporter(s, m, "n1")
	r, err := m.Reserve(context.Background(), []*raftstore.Limit{lim}, 100_000, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rp.settle(r, 100_000)
	rp.flush(t)
	stalled := budget.New(budget.Config{NodeID: "n2", State: s, GrantWait: time.Second,
		Propose: func(context.Context, *pb.Command) error { return raftstore.ErrNotLeader }})
	_, err = stalled.Reserve(context.Background(), []*raftstore.Limit{lim}, 1, time.Now())
	asExceeded(t, err)
}
