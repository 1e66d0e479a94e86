package raftstore

import (
	"fmt"
	"github.com/google/btree"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// The large parts of the state (keys, teams, budget periods, rollups,
// request ids) live in copy-on-write B-trees: a write copies the few nodes
// on the path to what it changes and shares everything else with the
// previous State, so it costs O(log n) in time and memory however large the
// state is, and an entry costs a few machine words of tree on top of the
// object it holds. Items are small values (or the stored messages
// themselves) ordered by their own fields, so a lookup allocates nothing.

// btreeDegree gives nodes of up to 63 items: shallow trees, and a path
// copy of a few kilobytes per write.
const btreeDegree = 32

// ptree is a persistent ordered set: never changed once published.
type ptree[T any] struct{ t *btree.BTreeG[T] }

func newPtree[T any](less btree.LessFunc[T]) ptree[T] {
	return ptree[T]{btree.NewG(btreeDegree, less)}
}

func (p ptree[T]) get(k T) (T, bool) { return p.t.Get(k) }

// Len returns the number of items.
func (p ptree[T]) Len() int { return p.t.Len() }

// ascend calls fn for every item in order until it returns false.
func (p ptree[T]) ascend(fn func(T) bool) { p.t.Ascend(btree.ItemIteratorG[T](fn)) }

// ascendFrom calls fn for every item not before pivot, in order, until it
// returns false.
func (p ptree[T]) ascendFrom(pivot T, fn func(T) bool) {
	p.t.AscendGreaterOrEqual(pivot, btree.ItemIteratorG[T](fn))
}

func (p ptree[T]) min() (T, bool) { return p.t.Min() }

// txn starts a batch of writes producing a new tree; p stays as it is.
func (p ptree[T]) txn() *ptxn[T] {
	shadow := *p.t // Clone resets the copy-on-write context of its receiver: not p's
	return &ptxn[T]{ptree[T]{shadow.Clone()}}
}

// ptxn is a tree being written; commit publishes it, after which it must
// not be written again.
type ptxn[T any] struct{ ptree[T] }

func (x *ptxn[T]) put(v T) (T, bool)    { return x.t.ReplaceOrInsert(v) }
func (x *ptxn[T]) delete(k T) (T, bool) { return x.t.Delete(k) }
func (x *ptxn[T]) commit() ptree[T]     { return x.ptree }

// --- item types ---------------------------------------------------------------

// named is an item keyed by a string.
type named[V any] struct {
	k string
	v V
}

func namedLess[V any](a, b named[V]) bool { return a.k < b.k }

func newNamedTree[V any]() ptree[named[V]] { return newPtree(namedLess[V]) }

func createdNanos(k *pb.Key) int64 {
	c := k.GetCreatedAt()
	return c.GetSeconds()*1e9 + int64(c.GetNanos())
}

// createdLess orders keys by creation time, then id (the order of Keys).
func createdLess(a, b *pb.StoredKey) bool {
	ta, tb := createdNanos(a.GetKey()), createdNanos(b.GetKey())
	if ta != tb {
		return ta < tb
	}
	return a.GetKey().GetId() < b.GetKey().GetId()
}

// teamKeyItem indexes a key under its team.
type teamKeyItem struct{ team, id string }

func teamKeyLess(a, b teamKeyItem) bool {
	if a.team != b.team {
		return a.team < b.team
	}
	return a.id < b.id
}

// periodItem orders budget periods by budget, then start: one budget's
// periods are adjacent, oldest first.
type periodItem struct {
	budget string
	start  int64
	bp     *pb.BudgetPeriod
}

func periodLess(a, b periodItem) bool {
	if a.budget != b.budget {
		return a.budget < b.budget
	}
	return a.start < b.start
}

// leaseItem indexes a budget period under a node holding a lease entry in
// it.
type leaseItem struct {
	node, budget string
	start        int64
}

func leaseLess(a, b leaseItem) bool {
	if a.node != b.node {
		return a.node < b.node
	}
	if a.budget != b.budget {
		return a.budget < b.budget
	}
	return a.start < b.start
}

// rollupLess orders rollups by hour, then key, team and model.
func rollupLess(a, b *pb.SpendRollup) bool {
	if a.GetHourUnix() != b.GetHourUnix() {
		return a.GetHourUnix() < b.GetHourUnix()
	}
	if a.GetKeyId() != b.GetKeyId() {
		return a.GetKeyId() < b.GetKeyId()
	}
	if a.GetTeamId() != b.GetTeamId() {
		return a.GetTeamId() < b.GetTeamId()
	}
	return a.GetModel() < b.GetModel()
}

// ageItem orders request ids by the time they were applied.
type ageItem struct {
	nanos int64
	id    string
}

func ageLess(a, b ageItem) bool {
	if a.nanos != b.nanos {
		return a.nanos < b.nanos
	}
	return a.id < b.id
}

// --- keys ---------------------------------------------------------------------

// keyWriter changes the key trees of one new state.
type keyWriter struct {
	byID      *ptxn[named[*pb.StoredKey]]
	byHash    *htTxn
	byCreated *ptxn[*pb.StoredKey]
	byTeam    *ptxn[teamKeyItem]
}

func (s *State) keyWriter() *keyWriter {
	return &keyWriter{byID: s.keys.txn(), byHash: s.keysByHash.txn(), byCreated: s.keysByCreated.txn(), byTeam: s.keysByTeam.txn()}
}

func (kw *keyWriter) commit(s *State) {
	s.keys, s.keysByHash = kw.byID.commit(), kw.byHash.commit()
	s.keysByCreated, s.keysByTeam = kw.byCreated.commit(), kw.byTeam.commit()
}

// withKeys returns a copy of s whose key trees fn changed.
func (s *State) withKeys(fn func(*keyWriter)) *State {
	kw := s.keyWriter()
	fn(kw)
	n := *s
	kw.commit(&n)
	return &n
}

// put stores sk, replacing the key with its id and its index entries.
func (kw *keyWriter) put(sk *pb.StoredKey) {
	k := sk.GetKey()
	view := newKeyView(sk)
	if old, ok := kw.byID.get(named[*pb.StoredKey]{k: k.GetId()}); ok {
		if oh, _ := hash32(old.v.GetSecretHash()); oh != view.hash {
			kw.byHash.delete(oh)
		}
		kw.byCreated.delete(old.v)
		if t := old.v.GetKey().GetTeamId(); t != "" {
			kw.byTeam.delete(teamKeyItem{t, k.GetId()})
		}
	}
	kw.byID.put(named[*pb.StoredKey]{k.GetId(), sk})
	kw.byHash.put(view)
	kw.byCreated.put(sk)
	if t := k.GetTeamId(); t != "" {
		kw.byTeam.put(teamKeyItem{t, k.GetId()})
	}
}

// putNew stores keys none of which the trees hold yet (a snapshot's):
// the secret-hash trie with the data plane views in one goroutine, the
// other trees in this one. A key id that comes twice is an error.
func (kw *keyWriter) putNew(keys []*pb.StoredKey) error {
	if len(keys) == 0 {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, sk := range keys {
			kw.byHash.put(newKeyView(sk))
		}
	}()
	var dup string
	for _, sk := range keys {
		k := sk.GetKey()
		if _, replaced := kw.byID.put(named[*pb.StoredKey]{k.GetId(), sk}); replaced && dup == "" {
			dup = k.GetId()
		}
		kw.byCreated.put(sk)
		if t := k.GetTeamId(); t != "" {
			kw.byTeam.put(teamKeyItem{t, k.GetId()})
		}
	}
	<-done
	if dup != "" {
		return fmt.Errorf("snapshot holds key %q twice: %w", dup, ErrInvalid)
	}
	return nil
}

// --- teams --------------------------------------------------------------------

// teamEntry is a stored team with its data plane view.
type teamEntry struct {
	cfg  *pb.Team
	view *Team
}

func newTeamEntry(t *pb.Team) named[*teamEntry] {
	return named[*teamEntry]{t.GetId(), &teamEntry{cfg: t, view: &Team{ID: t.GetId(), Name: t.GetName(),
		Budget: limitOf(TeamBudgetID(t.GetId()), t.GetBudget()), Limits: rateLimitsOf("team:"+t.GetId(), t.GetLimits())}}}
}

func (s *State) team(id string) *teamEntry {
	if e, ok := s.teams.get(named[*teamEntry]{k: id}); ok {
		return e.v
	}
	return nil
}

// --- budget periods -------------------------------------------------------------

// periodWriter changes the budget periods of one new state, keeping the
// index of leases by node in step.
type periodWriter struct {
	periods *ptxn[periodItem]
	leases  *ptxn[leaseItem]
}

func (s *State) periodWriter() *periodWriter {
	return &periodWriter{periods: s.periods.txn(), leases: s.leasesByNode.txn()}
}

func (pw *periodWriter) commit(s *State) {
	s.periods, s.leasesByNode = pw.periods.commit(), pw.leases.commit()
}

func (pw *periodWriter) get(budget string, start int64) *pb.BudgetPeriod {
	if it, ok := pw.periods.get(periodItem{budget: budget, start: start}); ok {
		return it.bp
	}
	return nil
}

// put stores bp and indexes the nodes that hold a lease entry in it.
func (pw *periodWriter) put(bp *pb.BudgetPeriod) {
	b, start := bp.GetBudget(), bp.GetPeriodStart()
	old := pw.get(b, start)
	for n := range old.GetLeases() {
		if _, still := bp.GetLeases()[n]; !still {
			pw.leases.delete(leaseItem{n, b, start})
		}
	}
	for n := range bp.GetLeases() {
		if _, had := old.GetLeases()[n]; !had {
			pw.leases.put(leaseItem{n, b, start})
		}
	}
	pw.periods.put(periodItem{b, start, bp})
}

func (pw *periodWriter) delete(budget string, start int64) {
	for n := range pw.get(budget, start).GetLeases() {
		pw.leases.delete(leaseItem{n, budget, start})
	}
	pw.periods.delete(periodItem{budget: budget, start: start})
}
