package raftstore

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Errors returned by Apply. They wrap the detail, so test with errors.Is.
var (
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrInvalid            = errors.New("invalid")
	ErrFailedPrecondition = errors.New("failed precondition")
)

// applyResult is what the FSM returns from Apply for every log entry.
type applyResult struct {
	value proto.Message
	err   error
}

// fsm is the Raft state machine. Apply runs on Raft's single apply
// goroutine; every apply publishes a new immutable State.
type fsm struct {
	state  atomic.Pointer[State]
	sealer *Sealer

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every publish
}

func newFSM() *fsm { return newSealedFSM(nil) }

// newSealedFSM is an FSM whose states open sealed credentials with
// sealer (nil: none are sealed).
func newSealedFSM(sealer *Sealer) *fsm {
	f := &fsm{changed: make(chan struct{}), sealer: sealer}
	st := emptyState()
	st.sealer = sealer
	f.state.Store(st)
	return f
}

func (f *fsm) publish(s *State) {
	f.state.Store(s)
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// changedCh returns a channel that is closed at the next publish.
func (f *fsm) changedCh() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	cur := f.state.Load()
	var res applyResult
	var next *State
	if l.Type == raft.LogCommand {
		var cmd pb.Command
		if err := proto.Unmarshal(l.Data, &cmd); err != nil {
			res.err = fmt.Errorf("decode command at index %d: %v: %w", l.Index, err, ErrInvalid)
		} else {
			next, res = applyCommand(cur, &cmd)
		}
	}
	if next == nil {
		cp := *cur
		next = &cp
	}
	next.Index = l.Index
	f.publish(next)
	return &res
}

// Snapshot implements raft.FSM. The published state is immutable, so the
// snapshot just holds on to it.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{st: f.state.Load()}, nil
}

// Restore implements raft.FSM: it builds a whole new state from the
// snapshot and swaps it in.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	var snap pb.Snapshot
	if err := proto.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	st, err := stateFromSnapshot(&snap, f.sealer)
	if err != nil {
		return err
	}
	f.publish(st)
	return nil
}

type fsmSnapshot struct{ st *State }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(snapshotOf(s.st))
	if err == nil {
		_, err = sink.Write(data)
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// snapshotOf returns the whole state as a Snapshot message, in a stable
// order.
func snapshotOf(st *State) *pb.Snapshot {
	snap := &pb.Snapshot{Index: st.Index, Keys: st.Keys(), Routes: st.RouteConfigs(), Credentials: st.Credentials(),
		Teams: st.Teams(), ClusterSecret: st.clusterSecret}
	st.WalkRollups(0, 1<<62, func(r *pb.SpendRollup) bool {
		snap.Rollups = append(snap.Rollups, r)
		return true
	})
	pks := make([]string, 0, len(st.periods))
	for k := range st.periods {
		pks = append(pks, k)
	}
	sort.Strings(pks)
	for _, k := range pks {
		snap.BudgetPeriods = append(snap.BudgetPeriods, st.periods[k])
	}
	nodes := make([]string, 0, len(st.nodeSeqs))
	for n := range st.nodeSeqs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		snap.NodeSeqs = append(snap.NodeSeqs, &pb.NodeSeq{Node: n, Seq: st.nodeSeqs[n]})
	}
	for h := range st.adminTokens {
		snap.AdminTokenHashes = append(snap.AdminTokenHashes, append([]byte(nil), h[:]...))
	}
	sort.Slice(snap.AdminTokenHashes, func(i, j int) bool {
		return string(snap.AdminTokenHashes[i]) < string(snap.AdminTokenHashes[j])
	})
	return snap
}

func stateFromSnapshot(snap *pb.Snapshot, sealer *Sealer) (*State, error) {
	st := emptyState()
	st.sealer = sealer
	st.Index = snap.GetIndex()
	for _, k := range snap.GetKeys() {
		h, err := hash32(k.GetSecretHash())
		if err != nil {
			return nil, fmt.Errorf("snapshot key %q: %w", k.GetKey().GetId(), err)
		}
		st.keys[k.GetKey().GetId()] = k
		st.keysByHash[h] = newKeyView(k)
	}
	for _, c := range snap.GetCredentials() {
		st.creds[c.GetName()] = c
	}
	for _, r := range snap.GetRoutes() {
		st.routeSrc[r.GetName()] = r
	}
	st.rebuildRoutes()
	for _, t := range snap.GetTeams() {
		st.putTeam(t)
	}
	txn := st.rollups.Txn()
	for _, r := range snap.GetRollups() {
		txn.Insert(rollupKey(r), r)
	}
	st.rollups = txn.Commit()
	for _, bp := range snap.GetBudgetPeriods() {
		st.periods[periodKey(bp.GetBudget(), bp.GetPeriodStart())] = bp
	}
	for _, ns := range snap.GetNodeSeqs() {
		st.nodeSeqs[ns.GetNode()] = ns.GetSeq()
	}
	st.clusterSecret = snap.GetClusterSecret()
	for _, b := range snap.GetAdminTokenHashes() {
		h, err := hash32(b)
		if err != nil {
			return nil, fmt.Errorf("snapshot admin token: %w", err)
		}
		st.adminTokens[h] = struct{}{}
	}
	return st, nil
}

func hash32(b []byte) ([32]byte, error) {
	var h [32]byte
	if len(b) != len(h) {
		return h, fmt.Errorf("hash has %d bytes, want 32: %w", len(b), ErrInvalid)
	}
	copy(h[:], b)
	return h, nil
}

// applyCommand returns the state after cmd, or nil when cmd changed nothing,
// and the command's result. It is deterministic: the time comes from the
// command, never from a clock.
func applyCommand(cur *State, cmd *pb.Command) (*State, applyResult) {
	ts := timestamppb.New(timeOf(cmd.GetUnixNanos()))
	var (
		next *State
		val  proto.Message
		err  error
	)
	switch op := cmd.GetOp().(type) {
	case *pb.Command_CreateKey:
		next, val, err = createKey(cur, op.CreateKey, ts)
	case *pb.Command_UpdateKey:
		next, val, err = updateKey(cur, op.UpdateKey.GetUpdate(), ts)
	case *pb.Command_RevokeKey:
		next, val, err = revokeKey(cur, op.RevokeKey.GetId(), ts)
	case *pb.Command_RotateKey:
		next, val, err = rotateKey(cur, op.RotateKey, ts)
	case *pb.Command_AddDeployment:
		next, val, err = addDeployment(cur, op.AddDeployment, ts)
	case *pb.Command_UpdateDeployment:
		next, val, err = updateDeployment(cur, op.UpdateDeployment.GetUpdate(), ts)
	case *pb.Command_RemoveDeployment:
		next, val, err = removeDeployment(cur, op.RemoveDeployment, ts)
	case *pb.Command_SetRouteOptions:
		next, val, err = setRouteOptions(cur, op.SetRouteOptions, ts)
	case *pb.Command_DeleteRoute:
		next, err = deleteRoute(cur, op.DeleteRoute.GetRoute())
	case *pb.Command_SetCredential:
		next, val, err = setCredential(cur, op.SetCredential, ts)
	case *pb.Command_DeleteCredential:
		next, err = deleteCredential(cur, op.DeleteCredential.GetName())
	case *pb.Command_AddAdminToken:
		next, err = addAdminToken(cur, op.AddAdminToken.GetTokenHash())
	case *pb.Command_Restore:
		next, err = restoreState(cur, op.Restore.GetSnapshot())
	case *pb.Command_CreateTeam:
		next, val, err = createTeam(cur, op.CreateTeam, ts)
	case *pb.Command_UpdateTeam:
		next, val, err = updateTeam(cur, op.UpdateTeam.GetUpdate(), ts)
	case *pb.Command_DeleteTeam:
		next, err = deleteTeam(cur, op.DeleteTeam.GetId())
	case *pb.Command_SpendReport:
		next, err = spendReport(cur, op.SpendReport)
	case *pb.Command_GrantLease:
		next, val, err = grantLease(cur, op.GrantLease)
	case *pb.Command_ReturnLease:
		next, err = returnLease(cur, op.ReturnLease)
	case *pb.Command_ReleaseNode:
		next, err = releaseNode(cur, op.ReleaseNode.GetNode())
	case *pb.Command_ImportKeys:
		next, val, err = importKeys(cur, op.ImportKeys, ts)
	case *pb.Command_SetClusterSecret:
		next, err = setClusterSecret(cur, op.SetClusterSecret)
	default:
		err = fmt.Errorf("unknown command %T: %w", op, ErrInvalid)
	}
	if err != nil {
		return nil, applyResult{err: err}
	}
	return next, applyResult{value: val}
}
