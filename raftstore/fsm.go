package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

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
	// onFatal is told, once, that the FSM stopped (see ApplyBatch); failed
	// is the reason. Both are used on Raft's apply goroutine only.
	onFatal func(error)
	failed  error
	// meter, when set, counts the bytes applied for snapshots by size.
	meter *logMeter

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

// setRetention sets the spend history retention, before the first apply.
func (f *fsm) setRetention(r Retention) {
	st := *f.state.Load()
	st.retention = r
	f.state.Store(&st)
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

// waitIndex blocks until the published state has reached index idx.
func (f *fsm) waitIndex(ctx context.Context, idx uint64) error {
	for {
		ch := f.changedCh()
		if f.state.Load().Index >= idx {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
		next, err = spendReport(cur, op.SpendReport, cmd.GetUnixNanos())
	case *pb.Command_GrantLease:
		next, val, err = grantLease(cur, op.GrantLease)
	case *pb.Command_GrantLeases:
		next, val = grantLeases(cur, op.GrantLeases)
	case *pb.Command_ReturnLease:
		next, err = returnLease(cur, op.ReturnLease)
	case *pb.Command_ReleaseNode:
		next, err = releaseNode(cur, op.ReleaseNode.GetNode())
	case *pb.Command_ImportKeys:
		next, val, err = importKeys(cur, op.ImportKeys, ts)
	case *pb.Command_SetClusterSecret:
		next, err = setClusterSecret(cur, op.SetClusterSecret)
	case *pb.Command_CreateUser:
		next, val, err = createUser(cur, op.CreateUser, ts)
	case *pb.Command_RevokeUser:
		next, val, err = revokeUser(cur, op.RevokeUser.GetName(), ts)
	case *pb.Command_RotateUser:
		next, val, err = rotateUser(cur, op.RotateUser, ts)
	case *pb.Command_EndConsoleSession:
		next, err = endConsoleSession(cur, op.EndConsoleSession, cmd.GetUnixNanos())
	case *pb.Command_PutMcpServer:
		next, val, err = putMcpServer(cur, op.PutMcpServer, ts)
	case *pb.Command_DeleteMcpServer:
		next, err = deleteMcpServer(cur, op.DeleteMcpServer.GetName())
	case *pb.Command_SetMcpTools:
		next, val, err = setMcpTools(cur, op.SetMcpTools, ts)
	default:
		err = fmt.Errorf("unknown command %T: %w", op, ErrInvalid)
	}
	if err != nil {
		return nil, applyResult{err: err}
	}
	return next, applyResult{value: val}
}
