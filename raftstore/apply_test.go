package raftstore

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func entry(t testing.TB, idx uint64, cmd *pb.Command) *raft.Log {
	t.Helper()
	if cmd.UnixNanos == 0 {
		cmd.UnixNanos = baseNanos + int64(idx)*1e9
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
}

// futureCommand is what a newer release might write: a Command whose op
// is field 99, unknown to this one.
func futureCommand(t testing.TB, idx uint64, ignorable bool) *raft.Log {
	l := entry(t, idx, &pb.Command{Ignorable: ignorable})
	l.Data = protowire.AppendTag(l.Data, 99, protowire.BytesType)
	l.Data = protowire.AppendBytes(l.Data, []byte{0x0a, 0x01, 'x'})
	return l
}

func results(t *testing.T, out []any) []*applyResult {
	t.Helper()
	rs := make([]*applyResult, len(out))
	for i, o := range out {
		r, ok := o.(*applyResult)
		if !ok {
			t.Fatalf("result %d is %T", i, o)
		}
		rs[i] = r
	}
	return rs
}

// TestApplyBatchPublishesOnce applies a burst of entries (with a
// configuration entry among them) as one batch: one State is published, at
// the last command's index, and each command gets its own result.
func TestApplyBatchPublishesOnce(t *testing.T) {
	f := newFSM()
	ch := f.changedCh()
	logs := []*raft.Log{
		entry(t, 1, createKeyCmd("k1", "s1")),
		entry(t, 2, createKeyCmd("k1", "s1")), // fails: exists
		{Index: 3, Term: 1, Type: raft.LogConfiguration},
		entry(t, 4, createKeyCmd("k2", "s2")),
	}
	out := f.ApplyBatch(logs)
	if len(out) != 4 || out[2] != nil {
		t.Fatalf("results = %v", out)
	}
	r0, r1, r3 := out[0].(*applyResult), out[1].(*applyResult), out[3].(*applyResult)
	if r0.err != nil || r0.value.(*pb.StoredKey).GetKey().GetId() != "k1" || !errors.Is(r1.err, ErrAlreadyExists) || r3.err != nil {
		t.Fatalf("results: %+v %+v %+v", r0, r1, r3)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no publish")
	}
	st := f.state.Load()
	if st.Index != 4 || st.KeyCount() != 2 {
		t.Fatalf("published index %d with %d keys", st.Index, st.KeyCount())
	}
	// Exactly one publish: the channel taken after the batch is still open.
	select {
	case <-f.changedCh():
		t.Fatal("published more than once")
	default:
	}
	if !slices.Equal(SupportedCommands()[:2], []string{"create_key", "update_key"}) {
		t.Errorf("SupportedCommands = %v", SupportedCommands())
	}
}

// TestUnknownCommandStopsTheStateMachine applies a batch holding a command
// of a newer release: the entries before it are published, it fails, the
// ones after it are not applied, onFatal hears about it once, and every
// later entry is refused too.
func TestUnknownCommandStopsTheStateMachine(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(idx uint64) *raft.Log
		want string
	}{
		{"unknown command", func(idx uint64) *raft.Log { return futureCommand(t, idx, false) }, "does not know (fields [99])"},
		{"empty command", func(idx uint64) *raft.Log { return entry(t, idx, &pb.Command{}) }, "does not know (fields none"},
		{"undecodable entry", func(idx uint64) *raft.Log {
			return &raft.Log{Index: idx, Type: raft.LogCommand, Data: []byte{0xff, 0xff, 0xff}}
		}, "does not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFSM()
			var fatal []error
			f.onFatal = func(err error) {
				fatal = append(fatal, err)
				if f.state.Load().Key("k1") == nil {
					t.Error("onFatal ran before the entries ahead of the bad one were published")
				}
			}
			rs := results(t, f.ApplyBatch([]*raft.Log{
				entry(t, 1, createKeyCmd("k1", "s1")), tc.bad(2), entry(t, 3, createKeyCmd("k2", "s2")),
			}))
			if rs[0].err != nil || !errors.Is(rs[1].err, ErrInvalid) || !strings.Contains(rs[1].err.Error(), tc.want) ||
				!errors.Is(rs[2].err, ErrStopped) {
				t.Fatalf("results: %v / %v / %v", rs[0].err, rs[1].err, rs[2].err)
			}
			st := f.state.Load()
			if st.Index != 1 || st.Key("k1") == nil || st.Key("k2") != nil {
				t.Fatalf("published index %d, k1 %v, k2 %v", st.Index, st.Key("k1") != nil, st.Key("k2") != nil)
			}
			later := results(t, f.ApplyBatch([]*raft.Log{entry(t, 4, createKeyCmd("k3", "s3"))}))
			if !errors.Is(later[0].err, ErrStopped) || f.state.Load().Index != 1 {
				t.Fatalf("a later entry was applied: %v", later[0].err)
			}
			if len(fatal) != 1 || !strings.Contains(fatal[0].Error(), "entry 2") {
				t.Fatalf("onFatal calls: %v", fatal)
			}
			// No snapshot may claim the entries it did not apply.
			if _, err := f.Snapshot(); !errors.Is(err, ErrStopped) {
				t.Errorf("Snapshot after the stop: %v", err)
			}
		})
	}
}

// TestIgnorableUnknownCommandIsSkipped applies a newer release's command
// marked ignorable: nothing changes but the index, and applying goes on.
func TestIgnorableUnknownCommandIsSkipped(t *testing.T) {
	f := newFSM()
	f.onFatal = func(err error) { t.Errorf("onFatal: %v", err) }
	rs := results(t, f.ApplyBatch([]*raft.Log{futureCommand(t, 1, true), entry(t, 2, createKeyCmd("k1", "s1"))}))
	if rs[0].err != nil || rs[0].value != nil || rs[1].err != nil {
		t.Fatalf("results: %+v %+v", rs[0], rs[1])
	}
	if st := f.state.Load(); st.Index != 2 || st.KeyCount() != 1 {
		t.Fatalf("index %d, %d keys", st.Index, st.KeyCount())
	}
}

// TestEveryCommandTypeHasAHandler builds each type SupportedCommands names
// (empty) and applies it: none is refused as unknown, and CommandName
// names it back.
func TestEveryCommandTypeHasAHandler(t *testing.T) {
	names := SupportedCommands()
	if len(names) < 20 {
		t.Fatalf("SupportedCommands = %v", names)
	}
	for _, name := range names {
		cmd := &pb.Command{UnixNanos: baseNanos}
		m := cmd.ProtoReflect()
		fd := commandOneof.Fields().ByName(protoreflect.Name(name))
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		if got := CommandName(cmd); got != name {
			t.Errorf("CommandName = %q, want %q", got, name)
		}
		_, res := applyCommand(newFixture(t).state(), cmd)
		if res.err != nil && strings.Contains(res.err.Error(), "unknown command") {
			t.Errorf("%s: %v", name, res.err)
		}
	}
	if CommandName(&pb.Command{}) != "" {
		t.Error("CommandName of an empty command")
	}
}

// TestStoreStopsOnUnknownCommand commits a newer release's command through
// real Raft: the Store's OnFatal hears about it and later commands fail.
func TestStoreStopsOnUnknownCommand(t *testing.T) {
	fatal := make(chan error, 1)
	cfg := testConfig(t.TempDir())
	cfg.OnFatal = func(err error) { fatal <- err }
	s := openReady(t, cfg)
	waitLeader(t, s)
	mustApply(t, s, createKeyCmd("k1", "s1"))
	if err := s.raft.Apply(futureCommand(t, 0, false).Data, 0).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fatal:
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "upgrade this node") {
			t.Errorf("OnFatal(%v)", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("OnFatal was not called")
	}
	if _, err := s.Apply(ctxT(t), createKeyCmd("k2", "s2")); !errors.Is(err, ErrStopped) {
		t.Errorf("Apply after the stop: %v", err)
	}
	if s.State().Key("k2") != nil {
		t.Error("a command after the stop was applied")
	}
}

// TestProposeGateRefusesCommands sets a gate that refuses one command
// type: Apply refuses it before proposing, others go through.
func TestProposeGateRefusesCommands(t *testing.T) {
	s := openReady(t, testConfig(t.TempDir()))
	waitLeader(t, s)
	var asked []string
	s.SetProposeGate(func(name string) error {
		asked = append(asked, name)
		if name == "create_team" {
			return errors.New("node n2 does not support create_team")
		}
		return nil
	})
	_, err := s.Apply(ctxT(t), teamCmd("t1", nil))
	if !errors.Is(err, ErrCommandRefused) || !strings.Contains(err.Error(), "n2 does not support") {
		t.Fatalf("Apply = %v", err)
	}
	mustApply(t, s, createKeyCmd("k1", "s1"))
	if s.State().Team("t1") != nil || s.State().Key("k1") == nil || !slices.Equal(asked, []string{"create_team", "create_key"}) {
		t.Fatalf("asked %v", asked)
	}
	s.SetProposeGate(nil)
	mustApply(t, s, teamCmd("t1", nil))
}
