package raftstore

import (
	"bytes"
	"encoding/binary"

	iradix "github.com/hashicorp/go-immutable-radix"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// The large parts of the state (keys, teams, budget periods) live in
// structure-sharing radix trees: a write copies the path to what it changes
// and shares everything else with the previous State, so it costs O(log n)
// in time and memory however many keys there are. The writers below batch
// the writes of one command (or one restore) into one transaction per tree.

// orderedInt64 encodes v so that byte order is numeric order.
func orderedInt64(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(v)^(1<<63))
}

func decodeOrderedInt64(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// createdKey orders keys by creation time, then id (the order of Keys).
func createdKey(k *pb.Key) []byte {
	c := k.GetCreatedAt()
	b := make([]byte, 0, 8+len(k.GetId()))
	b = orderedInt64(b, c.GetSeconds()*1e9+int64(c.GetNanos()))
	return append(b, k.GetId()...)
}

// teamKeyKey indexes a key under its team.
func teamKeyKey(team, id string) []byte {
	b := make([]byte, 0, len(team)+1+len(id))
	b = append(b, team...)
	b = append(b, 0)
	return append(b, id...)
}

// keyWriter changes the key trees of one new state.
type keyWriter struct {
	byID, byHash, byCreated, byTeam *iradix.Txn
}

// withKeys returns a copy of s whose key trees fn changed.
func (s *State) withKeys(fn func(*keyWriter)) *State {
	kw := &keyWriter{byID: s.keys.Txn(), byHash: s.keysByHash.Txn(), byCreated: s.keysByCreated.Txn(), byTeam: s.keysByTeam.Txn()}
	fn(kw)
	n := *s
	n.keys, n.keysByHash = kw.byID.CommitOnly(), kw.byHash.CommitOnly()
	n.keysByCreated, n.keysByTeam = kw.byCreated.CommitOnly(), kw.byTeam.CommitOnly()
	return &n
}

// put stores sk, replacing the key with its id and its index entries.
func (kw *keyWriter) put(sk *pb.StoredKey) {
	k := sk.GetKey()
	id := []byte(k.GetId())
	if v, ok := kw.byID.Get(id); ok {
		old := v.(*pb.StoredKey)
		if !bytes.Equal(old.GetSecretHash(), sk.GetSecretHash()) {
			kw.byHash.Delete(old.GetSecretHash())
		}
		kw.byCreated.Delete(createdKey(old.GetKey()))
		if t := old.GetKey().GetTeamId(); t != "" {
			kw.byTeam.Delete(teamKeyKey(t, k.GetId()))
		}
	}
	kw.byID.Insert(id, sk)
	kw.byHash.Insert(sk.GetSecretHash(), newKeyView(sk))
	kw.byCreated.Insert(createdKey(k), sk)
	if t := k.GetTeamId(); t != "" {
		kw.byTeam.Insert(teamKeyKey(t, k.GetId()), struct{}{})
	}
}

// teamEntry is a stored team with its data plane view.
type teamEntry struct {
	cfg  *pb.Team
	view *Team
}

func newTeamEntry(t *pb.Team) *teamEntry {
	return &teamEntry{cfg: t, view: &Team{ID: t.GetId(), Name: t.GetName(), Budget: limitOf(TeamBudgetID(t.GetId()), t.GetBudget()),
		Limits: rateLimitsOf("team:"+t.GetId(), t.GetLimits())}}
}

func (s *State) team(id string) *teamEntry {
	if v, ok := s.teams.Get([]byte(id)); ok {
		return v.(*teamEntry)
	}
	return nil
}

// periodKey orders budget periods by budget, then start: one budget's
// periods share the prefix budget+"\x00", oldest first.
func periodKey(budget string, start int64) []byte {
	b := make([]byte, 0, len(budget)+9)
	b = append(b, budget...)
	b = append(b, 0)
	return orderedInt64(b, start)
}

// leaseKey indexes a budget period under a node holding a lease in it.
func leaseKey(node string, pk []byte) []byte {
	b := make([]byte, 0, len(node)+1+len(pk))
	b = append(b, node...)
	b = append(b, 0)
	return append(b, pk...)
}

// periodWriter changes the budget periods of one new state, keeping the
// index of leases by node in step.
type periodWriter struct {
	periods, leases *iradix.Txn
}

func (s *State) periodWriter() *periodWriter {
	return &periodWriter{periods: s.periods.Txn(), leases: s.leasesByNode.Txn()}
}

func (pw *periodWriter) commit(s *State) {
	s.periods, s.leasesByNode = pw.periods.CommitOnly(), pw.leases.CommitOnly()
}

func (pw *periodWriter) get(pk []byte) *pb.BudgetPeriod {
	if v, ok := pw.periods.Get(pk); ok {
		return v.(*pb.BudgetPeriod)
	}
	return nil
}

// put stores bp under pk and indexes the nodes that hold a lease entry in
// it.
func (pw *periodWriter) put(pk []byte, bp *pb.BudgetPeriod) {
	old := pw.get(pk)
	for n := range old.GetLeases() {
		if _, still := bp.GetLeases()[n]; !still {
			pw.leases.Delete(leaseKey(n, pk))
		}
	}
	for n := range bp.GetLeases() {
		if _, had := old.GetLeases()[n]; !had {
			pw.leases.Insert(leaseKey(n, pk), struct{}{})
		}
	}
	pw.periods.Insert(pk, bp)
}

func (pw *periodWriter) delete(pk []byte) {
	old := pw.get(pk)
	for n := range old.GetLeases() {
		pw.leases.Delete(leaseKey(n, pk))
	}
	pw.periods.Delete(pk)
}
