// Package budget spends budgets out of leases. The leader grants each node
// a slice of a budget period's remainder through Raft, so the sum of the
// leases never exceeds what is left; a request reserves its estimated cost
// from this node's lease before it goes upstream and settles the real cost
// afterwards. Only a node running low waits for Raft (to be granted more);
// the common path takes this package's own mutex and nothing else.
package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// StateSource yields the current control state without blocking.
type StateSource interface {
	State() *raftstore.State
}

// Proposer applies a command through the leader and returns once this
// node's state includes it.
type Proposer func(ctx context.Context, cmd *pb.Command) error

// Config configures a Manager.
type Config struct {
	NodeID  string
	State   StateSource
	Propose Proposer
	// ProposeResult, when set, is used instead of Propose and returns the
	// command's result where it has one (on the leader): a batch of lease
	// requests then learns which of them failed.
	ProposeResult func(ctx context.Context, cmd *pb.Command) (proto.Message, error)
	// GrantWait bounds how long a request waits for a larger lease when
	// this node's lease is too small for it and cannot be overdrawn (see
	// OverdraftBound); it outlasts an election. Default 5s.
	GrantWait time.Duration
	// NoRenewAhead turns off the background lease requests below the
	// low-water mark: a lease grows only when a request needs it (tests
	// of exact lease sizes).
	NoRenewAhead bool
	Logger       *slog.Logger
}

// Manager tracks this node's leases, reservations and unreported spend.
type Manager struct {
	cfg Config

	mu     sync.Mutex
	local  map[periodRef]*account
	grants map[periodRef]chan struct{} // in-flight lease requests, closed when done

	batcher grantBatcher
}

type periodRef struct {
	budget string
	start  int64
}

// account is this node's view of one budget period.
type account struct {
	reserved   int64 // estimates of requests in flight
	unreported int64 // settled locally, not yet applied in Raft
	wantNext   int64 // the next lease request's size
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.GrantWait <= 0 {
		cfg.GrantWait = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, local: map[periodRef]*account{}, grants: map[periodRef]chan struct{}{}}
	m.batcher.m = m
	return m
}

// Exceeded is returned when a budget cannot cover a request.
type Exceeded struct {
	Budget      *raftstore.Limit
	PeriodStart int64
	SpentNanos  int64
	ResetAt     int64 // Unix seconds; 0 for a total budget
}

func (e *Exceeded) Error() string {
	return fmt.Sprintf("budget %s exhausted: spent %d of %d nano-dollars", e.Budget.ID, e.SpentNanos, e.Budget.LimitNanos)
}

// Reservation is what a request holds of its budgets until it settles.
type Reservation struct {
	refs   [2]periodRef
	n      int
	amount int64
}

// NewReservation returns a reservation of amount that belongs to no
// budget period, for stand-ins of a Manager (proxy.Budgets in tests).
func NewReservation(amount int64) *Reservation { return &Reservation{amount: amount} }

// Amount is what the reservation holds of each of its budgets.
func (r *Reservation) Amount() int64 {
	if r == nil {
		return 0
	}
	return r.amount
}

// Uses returns the budget periods of the reservation with the cost that
// counts against each (for the ledger).
func (r *Reservation) Uses(cost int64) []*pb.BudgetUse {
	if r == nil || r.n == 0 {
		return nil
	}
	out := make([]*pb.BudgetUse, r.n)
	for i := range r.n {
		out[i] = &pb.BudgetUse{Budget: r.refs[i].budget, PeriodStart: r.refs[i].start, SpentNanos: cost}
	}
	return out
}

// Restore counts spend that was recorded but not yet reported, e.g. read
// from the ledger after a restart.
func (m *Manager) Restore(uses []*pb.BudgetUse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range uses {
		m.accountOf(periodRef{u.GetBudget(), u.GetPeriodStart()}).unreported += u.GetSpentNanos()
	}
}

func (m *Manager) accountOf(ref periodRef) *account {
	a := m.local[ref]
	if a == nil {
		a = &account{}
		m.local[ref] = a
	}
	return a
}

// available returns what this node may still reserve of ref.
func (m *Manager) available(st *raftstore.State, ref periodRef, a *account) int64 {
	var lease int64
	if bp := st.BudgetPeriod(ref.budget, ref.start); bp != nil {
		lease = bp.GetLeases()[m.cfg.NodeID]
	}
	return lease - a.unreported - a.reserved
}

// Reserve sets estimate aside in every budget that applies (at most two:
// the key's and its team's). When this node's lease is short it asks the
// leader for more and waits up to GrantWait; a budget with nothing left
// returns *Exceeded.
func (m *Manager) Reserve(ctx context.Context, limits []*raftstore.Limit, estimate int64, now time.Time) (*Reservation, error) {
	if len(limits) == 0 {
		return nil, nil
	}
	r := &Reservation{amount: max(estimate, 1)}
	for _, l := range limits {
		r.refs[r.n] = periodRef{l.ID, raftstore.PeriodStart(l.Period, now)}
		r.n++
	}
	deadline := time.Now().Add(m.cfg.GrantWait)
	for {
		short, lim := m.tryReserve(r, limits)
		if short < 0 {
			m.renewIfLow(r, limits)
			return r, nil
		}
		ref := r.refs[short]
		room, err := m.requestLease(ctx, ref, lim, r.amount, deadline)
		if room && err == nil && time.Now().Before(deadline) {
			continue // something was left to grant: look again
		}
		if room && ctx.Err() == nil {
			// The budget had room, but no grant could be made (no
			// leader), or time is up (the grant, or another request's,
			// took GrantWait): a last look, then overdraw the lease
			// within the bound, as long as the budget has money left.
			if short, _ := m.tryReserve(r, limits); short < 0 {
				m.renewIfLow(r, limits)
				return r, nil
			}
			if m.tryOverdraw(r, limits) {
				return r, nil
			}
		}
		if err != nil && room {
			if pause := min(leaseRetryPause, time.Until(deadline)); pause > 0 && ctx.Err() == nil {
				// Past the bound: ask again (an election ends) until
				// GrantWait is over.
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
				continue
			}
			return nil, fmt.Errorf("budget %s: could not get a lease: %w", ref.budget, err)
		}
		st := m.cfg.State.State()
		e := &Exceeded{Budget: lim, PeriodStart: ref.start, ResetAt: raftstore.PeriodReset(lim.Period, ref.start)}
		if bp := st.BudgetPeriod(ref.budget, ref.start); bp != nil {
			e.SpentNanos = bp.GetSpentNanos()
		}
		m.mu.Lock()
		if a := m.local[ref]; a != nil {
			e.SpentNanos += a.unreported // spent here, not yet reported
		}
		m.mu.Unlock()
		return nil, e
	}
}

// left returns what a budget period still has to grant, cluster-wide.
func (m *Manager) left(ref periodRef, lim *raftstore.Limit) int64 {
	left := lim.LimitNanos
	if bp := m.cfg.State.State().BudgetPeriod(ref.budget, ref.start); bp != nil {
		left -= bp.GetSpentNanos()
		for _, l := range bp.GetLeases() {
			left -= l
		}
	}
	return left
}

// tryReserve reserves r in every budget at once, or in none. It returns -1
// on success, else the index of a budget that is short and its limit.
func (m *Manager) tryReserve(r *Reservation, limits []*raftstore.Limit) (int, *raftstore.Limit) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// The state is read under the lock: Reported lowers unreported under
	// it only after Raft's lease already shrank, so a state read before
	// Reported ran would count the reported spend neither in the lease
	// nor in unreported, and over-grant by that much.
	st := m.cfg.State.State()
	for i := range r.n {
		a := m.accountOf(r.refs[i])
		if m.available(st, r.refs[i], a) < r.amount {
			return i, limits[i]
		}
	}
	for i := range r.n {
		m.accountOf(r.refs[i]).reserved += r.amount
	}
	return -1, nil
}

// requestLease asks the leader for more of ref (one request at a time per
// budget period; others wait for it). room reports whether the budget had
// anything left to grant when the request was made — the caller then looks
// again — and err whether the request itself failed.
func (m *Manager) requestLease(ctx context.Context, ref periodRef, lim *raftstore.Limit, need int64, deadline time.Time) (room bool, err error) {
	m.mu.Lock()
	if ch, ok := m.grants[ref]; ok { // someone is already asking
		m.mu.Unlock()
		select {
		case <-ch:
			return true, nil // look again
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Until(deadline)):
			return true, errGrantTimeout
		}
	}
	if m.left(ref, lim) <= 0 {
		m.mu.Unlock()
		return false, nil
	}
	ch := make(chan struct{})
	m.grants[ref] = ch
	a := m.accountOf(ref)
	want := leaseWant(lim, need, a)
	m.mu.Unlock()

	err = m.batcher.grant(ctx, &pb.GrantLeaseCommand{
		Node: m.cfg.NodeID, Budget: ref.budget, PeriodStart: ref.start, WantNanos: want}, deadline)

	m.mu.Lock()
	delete(m.grants, ref)
	close(ch)
	m.mu.Unlock()
	return true, err
}

// leaseRetryPause is how long a request that could get no lease waits
// before it asks again.
const leaseRetryPause = 50 * time.Millisecond

// errGrantTimeout: another request's lease request for the same budget
// did not end within this request's GrantWait.
var errGrantTimeout = errors.New("no lease was granted in time")

// overdraftDivisor sets the most a node may overdraw a budget's lease
// while no lease can be granted: 1/overdraftDivisor of the limit, or one
// request's reservation when that is larger.
const overdraftDivisor = 32

// OverdraftBound returns the most a node may spend of budget lim beyond
// its lease while no lease can be granted (no leader), when the largest
// reservation it admits is largest. A cluster of n nodes may so overshoot
// the budget by at most n times this.
func OverdraftBound(lim *raftstore.Limit, largest int64) int64 {
	return max(lim.LimitNanos/overdraftDivisor, largest)
}

// tryOverdraw reserves r beyond this node's leases, when a lease could not
// be granted: in every budget at once or in none, only while the budget as
// replicated (and as spent here) still has money left, and only up to
// OverdraftBound beyond the lease. It keeps the data plane answering
// through an election near a budget's edge. Spend reports then take the
// spend off the lease (never below zero) and count it all, so later
// grants see the overshoot.
func (m *Manager) tryOverdraw(r *Reservation, limits []*raftstore.Limit) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.cfg.State.State()
	for i := range r.n {
		ref, lim := r.refs[i], limits[i]
		a := m.accountOf(ref)
		avail := m.available(st, ref, a)
		spent := a.unreported
		if bp := st.BudgetPeriod(ref.budget, ref.start); bp != nil {
			spent += bp.GetSpentNanos()
		}
		if spent >= lim.LimitNanos {
			return false // nothing left, whoever holds the leases
		}
		// Beyond the lease once reserved: up to 1/overdraftDivisor of the
		// limit, or one request of any size that starts within the lease.
		if over := r.amount - avail; over > lim.LimitNanos/overdraftDivisor && avail < 0 {
			return false
		}
	}
	for i := range r.n {
		m.accountOf(r.refs[i]).reserved += r.amount
	}
	return true
}

// renewIfLow asks, in the background, for more of every budget of r
// whose lease has run below its low-water mark (half of what a lease
// request asks for), so that a node holds enough to keep admitting while
// the leader changes.
func (m *Manager) renewIfLow(r *Reservation, limits []*raftstore.Limit) {
	if m.cfg.NoRenewAhead {
		return
	}
	m.mu.Lock()
	st := m.cfg.State.State()
	var low []int
	for i := range r.n {
		ref, lim := r.refs[i], limits[i]
		if _, asking := m.grants[ref]; asking {
			continue
		}
		a := m.accountOf(ref)
		if m.available(st, ref, a) < lowWater(lim, r.amount, a) && m.left(ref, lim) > 0 {
			low = append(low, i)
		}
	}
	m.mu.Unlock()
	for _, i := range low {
		ref, lim, need := r.refs[i], limits[i], r.amount
		go func() {
			// Bounded by GrantWait; requestLease skips a budget with
			// nothing left to grant.
			_, _ = m.requestLease(context.Background(), ref, lim, need, time.Now().Add(m.cfg.GrantWait))
		}()
	}
}

// leaseWant is what a lease request asks for, for requests of need.
func leaseWant(lim *raftstore.Limit, need int64, a *account) int64 {
	return max(need*4, lim.LimitNanos/32, a.wantNext)
}

// lowWater is the lease left below which a node asks for more ahead of
// need.
func lowWater(lim *raftstore.Limit, need int64, a *account) int64 {
	return leaseWant(lim, need, a) / 2
}

func (m *Manager) lease(ref periodRef) int64 {
	if bp := m.cfg.State.State().BudgetPeriod(ref.budget, ref.start); bp != nil {
		return bp.GetLeases()[m.cfg.NodeID]
	}
	return 0
}

// Settle ends a reservation: the estimate is released and the real cost
// counts as spend not yet reported. Settle with a nil reservation does
// nothing.
func (m *Manager) Settle(r *Reservation, cost int64) {
	if r == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range r.n {
		a := m.accountOf(r.refs[i])
		a.reserved -= r.amount
		a.unreported += cost
	}
}

// Reported tells the manager that spend was applied in Raft (the node's
// lease there shrank by the same amounts).
func (m *Manager) Reported(uses []*pb.BudgetUse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range uses {
		ref := periodRef{u.GetBudget(), u.GetPeriodStart()}
		a := m.accountOf(ref)
		a.unreported -= u.GetSpentNanos()
		if a.unreported == 0 && a.reserved == 0 && m.lease(ref) == 0 {
			delete(m.local, ref)
		}
	}
}
