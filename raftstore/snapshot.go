package raftstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// A Raft snapshot is streamed: snapshotMagic, then records, each a kind
// byte, a uvarint length and that many bytes: one recordHeader (a
// pb.SnapshotHeader), recordPart records (pb.Snapshot messages each
// holding up to snapshotChunk items of one part of the state; together
// they are the whole Snapshot), and one recordEnd (empty) so that a
// truncated stream is told from a complete one. Neither writing nor
// reading holds more than one record in memory besides the state itself.
//
// Releases before this format wrote the whole state as one pb.Snapshot
// message; a protobuf message never starts with a zero byte, so Restore
// tells the two apart by the magic and still reads the old one.
const (
	snapshotMagic  = "\x00TGSNAP"
	snapshotFormat = 2
	snapshotChunk  = 1024
	maxRecordBytes = 256 << 20
	recordHeader   = 'H'
	recordPart     = 'S'
	recordEnd      = 'E'
)

// Snapshot implements raft.FSM. The published state is immutable, so the
// snapshot just holds on to it. A stopped state machine refuses: Raft
// would label the snapshot with the index of entries it never applied, and
// compact them away. (Raft calls Snapshot on the apply goroutine, the only
// one that sets failed.)
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if f.failed != nil {
		return nil, f.failed
	}
	if f.meter != nil {
		f.meter.snapshotTaken()
	}
	return &fsmSnapshot{st: f.state.Load(), meter: f.meter}, nil
}

type fsmSnapshot struct {
	st    *State
	meter *logMeter
}

// Persist streams the state into sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	cs := &countingSink{SnapshotSink: sink}
	w := bufio.NewWriterSize(cs, 64<<10)
	err := writeSnapshot(w, s.st)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	if s.meter != nil {
		s.meter.persisted(cs.n)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// Restore implements raft.FSM: it builds a whole new state from the
// snapshot, record by record, and swaps it in; on any error the current
// state stays. The GC runs less often meanwhile (see boostGC).
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	defer boostGC()()
	st, err := readSnapshot(bufio.NewReaderSize(rc, 64<<10), f.newBuilder())
	if err != nil {
		return err
	}
	f.publish(st)
	return nil
}

func (f *fsm) newBuilder() *stateBuilder {
	return newStateBuilder(f.sealer, f.state.Load().retention)
}

func writeRecord(w io.Writer, kind byte, m proto.Message) error {
	var data []byte
	if m != nil {
		var err error
		if data, err = (proto.MarshalOptions{Deterministic: true}).Marshal(m); err != nil {
			return err
		}
	}
	hdr := binary.AppendUvarint([]byte{kind}, uint64(len(data)))
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

func writeSnapshot(w io.Writer, st *State) error {
	if _, err := io.WriteString(w, snapshotMagic); err != nil {
		return err
	}
	if err := writeRecord(w, recordHeader, &pb.SnapshotHeader{FormatVersion: snapshotFormat, Index: st.Index}); err != nil {
		return err
	}
	if err := writeKeyParts(w, st); err != nil {
		return err
	}
	if err := snapshotParts(st, func(part *pb.Snapshot) error { return writeRecord(w, recordPart, part) }); err != nil {
		return err
	}
	return writeRecord(w, recordEnd, nil)
}

func readSnapshot(r *bufio.Reader, b *stateBuilder) (*State, error) {
	head, err := r.Peek(len(snapshotMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	if string(head) != snapshotMagic {
		return readLegacySnapshot(r, b)
	}
	_, _ = r.Discard(len(snapshotMagic))
	// One goroutine reads and decodes the records while this one builds
	// the state from them: a restart restores in about the time of the
	// larger of the two rather than their sum.
	parts := make(chan snapshotPart, 4)
	stop := make(chan struct{})
	var index uint64
	decoded := make(chan error, 1)
	go func() {
		defer close(parts)
		decoded <- decodeRecords(r, &index, parts, stop)
	}()
	for part := range parts {
		if err := b.addPart(part); err != nil {
			close(stop)
			for range parts { // let the decoder finish before the reader closes
			}
			return nil, err
		}
	}
	if err := <-decoded; err != nil {
		return nil, err
	}
	b.st.Index = index
	return b.finish(), nil
}

// decodeRecords reads a streamed snapshot's records (after the magic),
// sets *index from the header and sends the decoded parts, until the end
// record, an error, or stop.
func decodeRecords(r *bufio.Reader, index *uint64, parts chan<- snapshotPart, stop <-chan struct{}) error {
	for n := 0; ; n++ {
		kind, data, err := readRecord(r)
		if err != nil {
			return fmt.Errorf("read snapshot record %d: %w", n, err)
		}
		switch {
		case n == 0 && kind == recordHeader:
			if *index, err = decodeHeader(data); err != nil {
				return err
			}
		case n > 0 && kind == recordPart:
			part, err := decodePart(data)
			if err != nil {
				return fmt.Errorf("decode snapshot record %d: %w", n, err)
			}
			select {
			case parts <- part:
			case <-stop:
				return nil
			}
		case n > 0 && kind == recordEnd:
			return nil
		default:
			return fmt.Errorf("snapshot record %d has kind %q: %w", n, kind, ErrInvalid)
		}
	}
}

func readRecord(r *bufio.Reader) (byte, []byte, error) {
	kind, size, err := recordHead(r)
	if err != nil {
		return 0, nil, err
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, noEOF(err)
	}
	return kind, data, nil
}

// decodeHeader decodes a header record and returns the snapshot's index.
func decodeHeader(data []byte) (uint64, error) {
	var h pb.SnapshotHeader
	if err := proto.Unmarshal(data, &h); err != nil {
		return 0, fmt.Errorf("decode snapshot header: %w", err)
	}
	if h.GetFormatVersion() != snapshotFormat {
		return 0, fmt.Errorf("snapshot format %d: this release reads %d: %w", h.GetFormatVersion(), snapshotFormat, ErrInvalid)
	}
	return h.GetIndex(), nil
}

// noEOF reports a stream that ends before its end record as truncated.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readLegacySnapshot reads the single-message form of older releases.
func readLegacySnapshot(r io.Reader, b *stateBuilder) (*State, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	var snap pb.Snapshot
	if err := proto.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	b.st.Index = snap.GetIndex()
	if err := b.add(&snap); err != nil {
		return nil, err
	}
	return b.finish(), nil
}

// snapshotParts calls emit with the state but its keys (which
// writeKeyParts and snapshotOf add) in parts of at most snapshotChunk
// items each, in a stable order: routes,
// credentials, teams, hourly then daily rollups, budget periods, node
// report counters, the audit log, users, admin tokens, applied request
// ids, the cluster secret, ended console sessions.
func snapshotParts(st *State, emit func(*pb.Snapshot) error) error {
	c := &chunker{part: &pb.Snapshot{}, emit: emit}
	steps := []func() error{
		func() error {
			c.part.Routes, c.part.Credentials, c.part.Teams = st.RouteConfigs(), st.Credentials(), st.Teams()
			c.part.McpServers = st.McpServers()
			c.n = 1
			return c.flush(true)
		},
		func() error {
			return walkParts(c, st.rollups, func(p *pb.Snapshot, v *pb.SpendRollup) { p.Rollups = append(p.Rollups, v) })
		},
		func() error {
			return walkParts(c, st.daily, func(p *pb.Snapshot, v *pb.SpendRollup) { p.DailyRollups = append(p.DailyRollups, v) })
		},
		func() error {
			return walkParts(c, st.periods, func(p *pb.Snapshot, v periodItem) { p.BudgetPeriods = append(p.BudgetPeriods, v.bp) })
		},
		func() error {
			return walkParts(c, st.audit, func(p *pb.Snapshot, v *pb.AuditRecord) { p.AuditRecords = append(p.AuditRecords, v) })
		},
		func() error {
			c.part.Users = st.Users()
			c.part.NodeSeqs, c.part.AdminTokenHashes = nodeSeqsOf(st), adminTokensOf(st)
			c.part.AppliedRequests, c.part.ClusterSecret = appliedRequestsOf(st), st.clusterSecret
			c.n = 1
			return c.flush(true)
		},
		func() error {
			return walkParts(c, st.endedSessions, func(p *pb.Snapshot, e endedSession) {
				p.EndedConsoleSessions = append(p.EndedConsoleSessions, e.proto())
			})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// chunker collects items into parts of at most snapshotChunk.
type chunker struct {
	part *pb.Snapshot
	n    int
	emit func(*pb.Snapshot) error
}

func (c *chunker) flush(force bool) error {
	if c.n == 0 || (!force && c.n < snapshotChunk) {
		return nil
	}
	err := c.emit(c.part)
	c.part, c.n = &pb.Snapshot{}, 0
	return err
}

// walkParts adds every item of t to the parts, then flushes.
func walkParts[T any](c *chunker, t ptree[T], add func(*pb.Snapshot, T)) error {
	var err error
	t.ascend(func(v T) bool {
		add(c.part, v)
		c.n++
		err = c.flush(false)
		return err == nil
	})
	if err != nil {
		return err
	}
	return c.flush(true)
}

func nodeSeqsOf(st *State) []*pb.NodeSeq {
	nodes := make([]string, 0, len(st.nodeSeqs))
	for n := range st.nodeSeqs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	out := make([]*pb.NodeSeq, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, &pb.NodeSeq{Node: n, Seq: st.nodeSeqs[n]})
	}
	return out
}

func adminTokensOf(st *State) [][]byte {
	out := make([][]byte, 0, len(st.adminTokens))
	for h := range st.adminTokens {
		out = append(out, append([]byte(nil), h[:]...))
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i]) < string(out[j]) })
	return out
}

// snapshotOf returns the whole state as one Snapshot message (what an
// admin snapshot save holds and a RestoreCommand carries).
func snapshotOf(st *State) *pb.Snapshot {
	snap := &pb.Snapshot{Keys: st.Keys()}
	_ = snapshotParts(st, func(part *pb.Snapshot) error {
		proto.Merge(snap, part)
		return nil
	})
	snap.Index = st.Index
	return snap
}

// stateBuilder builds a new state from the parts of a snapshot.
type stateBuilder struct {
	st             *State
	keys           *keyWriter
	teams          *ptxn[named[*teamEntry]]
	rollups, daily *ptxn[*pb.SpendRollup]
	periods        *periodWriter
	requests       []*pb.AppliedRequest
	audit          *ptxn[*pb.AuditRecord]
	// replaceKeys: a key id that comes again replaces the earlier copy,
	// as releases before putNew applied a Restore command's snapshot (a
	// log entry, which every release must apply alike); Raft snapshots
	// refuse it.
	replaceKeys bool
}

func newStateBuilder(sealer *Sealer, r Retention) *stateBuilder {
	st := emptyState()
	st.sealer, st.retention = sealer, r
	return &stateBuilder{st: st, keys: st.keyWriter(), teams: st.teams.txn(), rollups: st.rollups.txn(),
		daily: st.daily.txn(), periods: st.periodWriter(), audit: st.audit.txn()}
}

// add merges one part of a snapshot into the state being built.
func (b *stateBuilder) add(part *pb.Snapshot) error {
	st := b.st
	keys := make([]*Key, 0, len(part.GetKeys()))
	for _, sk := range part.GetKeys() {
		if _, err := hash32(sk.GetSecretHash()); err != nil {
			return fmt.Errorf("snapshot key %q: %w", sk.GetKey().GetId(), err)
		}
		k, err := newKey(sk)
		if err != nil {
			return fmt.Errorf("snapshot key: %w", err)
		}
		keys = append(keys, k)
	}
	if err := b.addKeys(keys); err != nil {
		return err
	}
	for _, h := range part.GetAdminTokenHashes() {
		h, err := hash32(h)
		if err != nil {
			return fmt.Errorf("snapshot admin token: %w", err)
		}
		st.adminTokens[h] = struct{}{}
	}
	for _, c := range part.GetCredentials() {
		st.creds[c.GetName()] = c
	}
	for _, r := range part.GetRoutes() {
		st.routeSrc[r.GetName()] = r
	}
	for _, t := range part.GetTeams() {
		b.teams.put(newTeamEntry(t))
	}
	addMcpServers(st, part.GetMcpServers())
	for _, r := range part.GetRollups() {
		b.rollups.put(r)
	}
	for _, r := range part.GetDailyRollups() {
		b.daily.put(r)
	}
	for _, bp := range part.GetBudgetPeriods() {
		b.periods.put(bp)
	}
	for _, ns := range part.GetNodeSeqs() {
		st.nodeSeqs[ns.GetNode()] = ns.GetSeq()
	}
	if s := part.GetClusterSecret(); s != "" {
		st.clusterSecret = s
	}
	b.requests = append(b.requests, part.GetAppliedRequests()...)
	for _, r := range part.GetAuditRecords() {
		b.audit.put(r)
	}
	if err := b.addEndedSessions(part.GetEndedConsoleSessions()); err != nil {
		return err
	}
	return b.addUsers(part.GetUsers())
}

func (b *stateBuilder) finish() *State {
	st := b.st
	b.keys.commit(st)
	st.teams, st.rollups, st.daily = b.teams.commit(), b.rollups.commit(), b.daily.commit()
	b.periods.commit(st)
	st.audit = b.audit.commit()
	st.putAppliedRequests(b.requests)
	st.rebuildRoutes()
	return st
}

// stateFromSnapshot builds a state from a whole Snapshot message: a
// Restore command's, where a key id that comes again replaces the earlier.
func stateFromSnapshot(snap *pb.Snapshot, sealer *Sealer, r Retention) (*State, error) {
	b := newStateBuilder(sealer, r)
	b.replaceKeys = true
	b.st.Index = snap.GetIndex()
	if err := b.add(snap); err != nil {
		return nil, err
	}
	return b.finish(), nil
}
