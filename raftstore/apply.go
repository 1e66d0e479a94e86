package raftstore

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// ErrStopped is the result of every entry after the state machine met one
// it cannot apply (see ApplyBatch).
var ErrStopped = errors.New("raftstore: state machine stopped")

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM: it applies the entries in order
// and publishes one State for the whole batch, at the index of its last
// command. The result of each command entry is an *applyResult; other
// entries (configuration changes) get nil.
//
// An entry this release cannot decode, or whose op it does not know and
// that is not marked ignorable, stops the state machine: what came before
// it in the batch is published, it and every later entry get an error and
// change nothing, and onFatal is told. Skipping it would let this replica
// silently diverge from the ones that applied it.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	if f.meter != nil {
		f.meter.add(logs)
	}
	out := make([]any, len(logs))
	cur := f.state.Load()
	next := cur // a private copy once anything changed
	var stop error
	for i, l := range logs {
		if f.failed != nil {
			out[i] = &applyResult{err: fmt.Errorf("entry %d: %w", l.Index, ErrStopped)}
			continue
		}
		if l.Type != raft.LogCommand {
			continue
		}
		st, res, fatal := applyEntry(next, l)
		if fatal != nil {
			stop = fatal
			f.failed = fmt.Errorf("%w: %w", ErrStopped, fatal)
			out[i] = &applyResult{err: fatal}
			continue
		}
		switch {
		case st != nil:
			next = st
		case next == cur:
			cp := *cur
			next = &cp
		}
		next.Index = l.Index
		out[i] = res
	}
	if next != cur {
		f.publish(next)
	}
	if stop != nil && f.onFatal != nil {
		f.onFatal(stop) // after the publish: it may well end the process
	}
	return out
}

// applyEntry decodes and applies one command entry to cur. It returns the
// new state (nil: unchanged) and the command's result, or a fatal error
// when the entry cannot be applied by this release.
func applyEntry(cur *State, l *raft.Log) (*State, *applyResult, error) {
	var cmd pb.Command
	if err := proto.Unmarshal(l.Data, &cmd); err != nil {
		return nil, nil, fmt.Errorf("raftstore: log entry %d does not decode (%v): was it written by a newer release? "+
			"upgrade this node: %w", l.Index, err, ErrInvalid)
	}
	if cmd.GetOp() == nil {
		if cmd.GetIgnorable() {
			return nil, &applyResult{}, nil
		}
		return nil, nil, fmt.Errorf("raftstore: log entry %d holds a command this release does not know "+
			"(fields %s): upgrade this node: %w", l.Index, unknownFields(&cmd), ErrInvalid)
	}
	var fp []byte
	if cmd.GetRequestId() != "" {
		fp = commandFingerprint(&cmd)
	}
	if res, ok := cur.appliedRequest(cmd.GetRequestId(), cmd.GetUnixNanos(), fp); ok {
		return nil, res, nil
	}
	next, res := applyCommand(cur, &cmd)
	if cmd.GetActor() != nil { // an admin write: audited
		if next == nil {
			cp := *cur
			next = &cp
		}
		next.appendAudit(l.Index, &cmd, &res)
	}
	if id := cmd.GetRequestId(); id != "" {
		if next == nil {
			cp := *cur
			next = &cp
		}
		next.rememberRequest(id, cmd.GetUnixNanos(), fp, &res)
	}
	return next, &res, nil
}

// unknownFields lists the field numbers of cmd that this release does not
// know, for the error that stops a node.
func unknownFields(cmd *pb.Command) string {
	raw := cmd.ProtoReflect().GetUnknown()
	var nums []protowire.Number
	for len(raw) > 0 {
		num, _, n := protowire.ConsumeField(raw)
		if n <= 0 {
			break
		}
		nums = append(nums, num)
		raw = raw[n:]
	}
	if len(nums) == 0 {
		return "none: the command is empty"
	}
	return fmt.Sprint(nums)
}

var commandOneof = (&pb.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("op")

// SupportedCommands returns the names of the command types this release
// applies (the fields of Command's op), for nodes to advertise, so that a
// leader proposes a new type only once every member knows it.
func SupportedCommands() []string {
	fields := commandOneof.Fields()
	out := make([]string, 0, fields.Len())
	for i := range fields.Len() {
		out = append(out, string(fields.Get(i).Name()))
	}
	return out
}

// CommandName returns the name of cmd's type as SupportedCommands lists
// it, or "" when cmd has no op this release knows.
func CommandName(cmd *pb.Command) string {
	fd := cmd.ProtoReflect().WhichOneof(commandOneof)
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}
