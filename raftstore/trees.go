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

// smallDegree is for the bounded logs that every admin write appends to
// and trims (request ids by id and by age, the audit log): nodes of up to
// 15 items. Each write copies a path of the three (and a trim a second
// one, at the oldest end), and with degree 32 those copies (a leaf of up
// to 63 items and its parents, each time) were most of a key create's
// garbage in the state machine: 15.5 -> 12.7 KB per create (BenchmarkFSMCreateKeyAdmin, 2,000
// creates), 22.5 -> 17.1 KB once the bounds trim (30,000). The order of
// the items, and so which ones the bounds forget, does not depend on the
// degree.
const smallDegree = 8

func newSmallPtree[T any](less btree.LessFunc[T]) ptree[T] {
	return ptree[T]{btree.NewG(smallDegree, less)}
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

// keyWriter changes the key trees of one new state. Every tree holds the
// same *Key objects.
type keyWriter struct {
	byID      *ptxn[*Key]
	byHash    *htTxn
	byCreated *ptxn[*Key]
	byTeam    *ptxn[*Key] // the keys that have a team
	// pendingHash are keys putNew stored that the trie does not hold yet.
	pendingHash []*Key
}

func (s *State) keyWriter() *keyWriter {
	return &keyWriter{byID: s.keys.txn(), byHash: s.keysByHash.txn(), byCreated: s.keysByCreated.txn(), byTeam: s.keysByTeam.txn()}
}

func (kw *keyWriter) commit(s *State) {
	kw.byHash.putAll(kw.pendingHash)
	kw.pendingHash = nil
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

// get returns the key with the given id, or nil.
func (kw *keyWriter) get(id string) *Key {
	k, _ := kw.byID.get(&Key{ID: id})
	return k
}

// put encodes sk and stores it, replacing the key with its id.
func (kw *keyWriter) put(sk *pb.StoredKey) (*Key, error) {
	k, err := newKey(sk)
	if err != nil {
		return nil, err
	}
	kw.putKey(k)
	return k, nil
}

// putKey stores k, replacing the key with its id and its index entries.
func (kw *keyWriter) putKey(k *Key) {
	if old, ok := kw.byID.put(k); ok {
		if old.hash != k.hash {
			var h [32]byte
			copy(h[:], old.hash)
			kw.byHash.delete(h)
		}
		kw.byCreated.delete(old)
		if old.TeamID != "" {
			kw.byTeam.delete(old)
		}
	}
	kw.byHash.put(k)
	kw.byCreated.put(k)
	if k.TeamID != "" {
		kw.byTeam.put(k)
	}
}

// putNew stores keys none of which the trees hold yet (a snapshot's) in
// the B-trees, and keeps them for the secret-hash trie, which commit
// builds from all of them at once (see htTxn.putAll). A key id that comes
// twice is an error.
func (kw *keyWriter) putNew(keys []*Key) error {
	var dup string
	for _, k := range keys {
		if _, replaced := kw.byID.put(k); replaced && dup == "" {
			dup = k.ID
		}
		kw.byCreated.put(k)
		if k.TeamID != "" {
			kw.byTeam.put(k)
		}
	}
	kw.pendingHash = append(kw.pendingHash, keys...)
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
