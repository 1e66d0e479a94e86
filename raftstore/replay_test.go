package raftstore

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// workload is a seeded mix of every kind of write the cluster sees: keys and
// teams with budgets, spend reports over weeks of hours (so that rollups
// fold and expire), lease grants one by one and in batches, returns and
// node releases, with request ids and their retries.
func workload(seed uint64, n int) []*raft.Log {
	var saved *pb.Snapshot // a state to restore later, as an admin would
	var replay *fsm        // applies the workload as it is built, for saved
	r := rand.New(rand.NewPCG(seed, 7))
	now := baseNanos
	seqs := map[string]uint64{}
	var logs []*raft.Log
	var sent []*pb.Command // commands with a request id, for retries
	nodes := []string{"n1", "n2", "n3"}
	keyID := func() string { return fmt.Sprintf("k%d", r.IntN(40)) }
	budgetOf := func() string {
		if r.IntN(3) == 0 {
			return TeamBudgetID(fmt.Sprintf("t%d", r.IntN(5)))
		}
		return KeyBudgetID(keyID())
	}
	for i := 0; len(logs) < n; i++ {
		now += int64(r.IntN(60)) * 1e9
		if r.IntN(30) == 0 {
			now += int64(r.IntN(24*3600)) * 1e9
		}
		if r.IntN(200) == 0 {
			now += int64(r.IntN(5)) * daySeconds * 1e9
		}
		var cmd *pb.Command
		switch k := r.IntN(20); {
		case k == 14:
			route := fmt.Sprintf("r%d", r.IntN(4))
			cmd = addDeploymentCmd(route, dep(fmt.Sprintf("d%d", i), "openai", fmt.Sprintf("c%d", r.IntN(3))))
		case k == 15:
			cmd = setCredentialCmd(fmt.Sprintf("c%d", r.IntN(3)), fmt.Sprintf("v%d", i))
		case k == 16:
			route := fmt.Sprintf("r%d", r.IntN(4))
			cmd = &pb.Command{Op: &pb.Command_SetRouteOptions{SetRouteOptions: &pb.SetRouteOptionsCommand{Route: route,
				Options: &pb.RouteOptions{Aliases: []string{fmt.Sprintf("alias%d", r.IntN(6))}, Strategy: "latency"}}}}
		case k == 17:
			cmd = addAdminTokenCmd(hashOf(fmt.Sprintf("token%d", r.IntN(5))))
		case k == 18:
			ik := &pb.ImportKeysCommand{}
			for range 1 + r.IntN(5) {
				id := fmt.Sprintf("imp%d", r.IntN(30))
				ik.Keys = append(ik.Keys, createKeyCmd(id, fmt.Sprintf("imp-secret-%s-%d", id, i)).GetCreateKey().GetKey())
			}
			cmd = &pb.Command{Op: &pb.Command_ImportKeys{ImportKeys: ik}}
		case k == 19 && saved != nil && r.IntN(10) == 0:
			cmd = restoreCmd(saved)
		case k == 19:
			cmd = removeDeploymentCmd(fmt.Sprintf("r%d", r.IntN(4)), fmt.Sprintf("d%d", r.IntN(i+1)))
		case k < 2:
			id := keyID()
			cmd = createKeyCmd(id, fmt.Sprintf("secret-%s-%d", id, i), "m1", "m*")
			sk := cmd.GetCreateKey().GetKey()
			sk.Key.Budget = &pb.Budget{LimitNanos: 1e6, Period: []string{PeriodDay, PeriodWeek, PeriodTotal}[r.IntN(3)]}
			if r.IntN(2) == 0 {
				sk.Key.TeamId = fmt.Sprintf("t%d", r.IntN(5))
			}
		case k == 2:
			id := fmt.Sprintf("t%d", r.IntN(5))
			cmd = &pb.Command{Op: &pb.Command_CreateTeam{CreateTeam: &pb.CreateTeamCommand{Team: &pb.Team{
				Id: id, Name: "team " + id, Budget: &pb.Budget{LimitNanos: 5e6, Period: PeriodMonth}}}}}
		case k == 3:
			name, team := fmt.Sprintf("n%d", i), ""
			if r.IntN(3) > 0 {
				team = fmt.Sprintf("t%d", r.IntN(5))
			}
			cmd = updateKeyCmd(&pb.UpdateKeyRequest{Id: keyID(), Name: &name, TeamId: &team,
				Budget: &pb.Budget{LimitNanos: int64(1 + r.IntN(1e6)), Period: PeriodDay}})
			if r.IntN(4) == 0 {
				cmd = &pb.Command{Op: &pb.Command_DeleteTeam{DeleteTeam: &pb.DeleteTeamCommand{Id: fmt.Sprintf("t%d", r.IntN(5))}}}
			}
		case k == 4:
			cmd = rotateKeyCmd(keyID(), fmt.Sprintf("rotated-%d", i))
		case k == 5:
			cmd = revokeKeyCmd(keyID())
		case k < 9:
			node := nodes[r.IntN(len(nodes))]
			seqs[node]++
			sr := &pb.SpendReportCommand{Node: node, Seq: seqs[node]}
			for range r.IntN(6) {
				hour := now/1e9 - now/1e9%3600 - int64(r.IntN(72))*3600
				sr.Rollups = append(sr.Rollups, &pb.SpendRollup{HourUnix: hour, KeyId: keyID(), Model: "m1",
					Requests: 1, CostNanos: int64(r.IntN(1000)), PromptTokens: 3})
			}
			for range r.IntN(3) {
				b := budgetOf()
				sr.Budgets = append(sr.Budgets, &pb.BudgetUse{Budget: b, PeriodStart: periodStartOf(b, now), SpentNanos: int64(r.IntN(20000))})
			}
			cmd = &pb.Command{Op: &pb.Command_SpendReport{SpendReport: sr}}
		case k < 11:
			b := budgetOf()
			cmd = &pb.Command{Op: &pb.Command_GrantLease{GrantLease: &pb.GrantLeaseCommand{
				Node: nodes[r.IntN(len(nodes))], Budget: b, PeriodStart: periodStartOf(b, now), WantNanos: int64(1 + r.IntN(300000))}}}
		case k == 11:
			gl := &pb.GrantLeasesCommand{}
			for range 1 + r.IntN(4) {
				b := budgetOf()
				gl.Grants = append(gl.Grants, &pb.GrantLeaseCommand{Node: nodes[r.IntN(len(nodes))], Budget: b,
					PeriodStart: periodStartOf(b, now), WantNanos: int64(1 + r.IntN(300000))})
			}
			cmd = &pb.Command{Op: &pb.Command_GrantLeases{GrantLeases: gl}}
		case k == 12:
			b := budgetOf()
			cmd = &pb.Command{Op: &pb.Command_ReturnLease{ReturnLease: &pb.ReturnLeaseCommand{
				Node: nodes[r.IntN(len(nodes))], Budget: b, PeriodStart: periodStartOf(b, now)}}}
		default:
			cmd = &pb.Command{Op: &pb.Command_ReleaseNode{ReleaseNode: &pb.ReleaseNodeCommand{Node: nodes[r.IntN(len(nodes))]}}}
		}
		switch {
		case len(sent) > 0 && r.IntN(8) == 0: // a retry of an earlier write
			cmd = proto.Clone(sent[max(0, len(sent)-1-r.IntN(5))]).(*pb.Command)
		case r.IntN(3) == 0:
			cmd.RequestId = fmt.Sprintf("req-%d", i)
			sent = append(sent, cmd)
		}
		cmd = proto.Clone(cmd).(*pb.Command)
		cmd.UnixNanos = now
		data, err := proto.Marshal(cmd)
		if err != nil {
			panic(err)
		}
		logs = append(logs, &raft.Log{Index: uint64(len(logs) + 1), Term: 1, Type: raft.LogCommand, Data: data})
		if replay == nil {
			replay = newReplayFSM()
		}
		replay.Apply(logs[len(logs)-1])
		if r.IntN(100) == 0 {
			saved = replay.state.Load().Snapshot()
		}
	}
	return logs
}

// periodStartOf is the start of the current period of a budget as the
// workload configures them (teams monthly; keys by day, which may differ
// from the key's own period: the state machine must cope).
func periodStartOf(budget string, nanos int64) int64 {
	if budget[:4] == "team" {
		return PeriodStart(PeriodMonth, timeOf(nanos))
	}
	return PeriodStart(PeriodDay, timeOf(nanos))
}

// shortRetention makes a few weeks of workload fold and expire rollups.
var shortRetention = Retention{Hourly: 2 * 24 * 3600 * 1e9, Daily: 9 * 24 * 3600 * 1e9}

func newReplayFSM() *fsm {
	f := newFSM()
	f.setRetention(shortRetention)
	return f
}

// resultString describes an entry's result the same way whether it was
// computed or remembered through a snapshot.
func resultString(t *testing.T, o any) string {
	t.Helper()
	r, ok := o.(*applyResult)
	if !ok {
		t.Fatalf("result is %T", o)
	}
	s := "ok"
	if r.err != nil {
		s = "err: " + r.err.Error()
	}
	if r.value != nil {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.value)
		if err != nil {
			t.Fatal(err)
		}
		s += fmt.Sprintf(" %T %x", r.value, b)
	}
	return s
}

func snapshotBytes(t *testing.T, st *State) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, st); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReplayAfterRestoreMatchesFreshApply applies one workload three ways:
// entry by entry; in random batches; and in random batches with the state
// machine persisted and restored into a new one now and then (a follower
// that restarts from snapshots). Every entry gets the same result and
// every way ends in the same state, byte for byte; and no state, once
// published, changes afterwards.
func TestReplayAfterRestoreMatchesFreshApply(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			logs := workload(seed, 1500)
			r := rand.New(rand.NewPCG(seed, 99))

			single := newReplayFSM()
			var want []string
			for _, l := range logs {
				want = append(want, resultString(t, single.Apply(l)))
			}

			batched, restarted := newReplayFSM(), newReplayFSM()
			type published struct {
				st   *State
				data []byte
			}
			var seen []published
			for i := 0; i < len(logs); {
				j := min(len(logs), i+1+r.IntN(40))
				for _, f := range []*fsm{batched, restarted} {
					out := f.ApplyBatch(logs[i:j])
					for k, o := range out {
						if got := resultString(t, o); got != want[i+k] {
							t.Fatalf("entry %d: result %s, want %s", i+k+1, got, want[i+k])
						}
					}
				}
				st := batched.state.Load()
				seen = append(seen, published{st, snapshotBytes(t, st)})
				if r.IntN(4) == 0 {
					var sink memSink
					snap, err := restarted.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					if err := snap.Persist(&sink); err != nil {
						t.Fatal(err)
					}
					restarted = newReplayFSM()
					if err := restarted.Restore(io.NopCloser(&sink.Buffer)); err != nil {
						t.Fatal(err)
					}
				}
				i = j
			}
			final := snapshotBytes(t, single.state.Load())
			if got := snapshotBytes(t, batched.state.Load()); !bytes.Equal(got, final) {
				t.Errorf("batched apply ends in another state than entry by entry")
			}
			if got := snapshotBytes(t, restarted.state.Load()); !bytes.Equal(got, final) {
				compareStates(t, restarted.state.Load(), single.state.Load())
				t.Errorf("apply with restores ends in another state than entry by entry")
			}
			// The indexes kept in step write by write are the ones a
			// restore builds from scratch.
			rebuilt := newReplayFSM()
			if err := rebuilt.Restore(io.NopCloser(bytes.NewReader(final))); err != nil {
				t.Fatal(err)
			}
			for name, st := range map[string]*State{"entry by entry": single.state.Load(), "batched": batched.state.Load(), "with restores": restarted.state.Load()} {
				if got, want := indexesOf(st), indexesOf(rebuilt.state.Load()); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: indexes differ from a rebuild:\n got %+v\nwant %+v", name, got, want)
				}
			}
			for i, p := range seen {
				if !bytes.Equal(snapshotBytes(t, p.st), p.data) {
					t.Fatalf("the state published after batch %d changed later", i)
				}
			}
		})
	}
}

// TestPersistWhileApplyingWritesTheCapturedState persists a snapshot on
// another goroutine, as Raft does, while the state machine keeps applying:
// the stream holds exactly the state captured (run with -race).
func TestPersistWhileApplyingWritesTheCapturedState(t *testing.T) {
	logs := workload(11, 1200)
	f := newReplayFSM()
	f.ApplyBatch(logs[:600])
	captured := f.state.Load()
	want := snapshotBytes(t, captured)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var sink memSink
	go func() { done <- snap.Persist(&sink) }()
	for i := 600; i < len(logs); i += 10 {
		f.ApplyBatch(logs[i:min(i+10, len(logs))])
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sink.Bytes(), want) {
		t.Error("the persisted snapshot is not the state captured when it was taken")
	}
	if f.state.Load() == captured {
		t.Fatal("the workload changed nothing after the snapshot")
	}
}

// stateIndexes lists what a State derives from its contents: the indexes
// of keys by team, secret hash and creation, of leases by node, and of
// request ids by age.
type stateIndexes struct {
	byTeam  []string // team/id
	byHash  map[string]Key
	byTime  []string
	leases  []leaseItem
	byAge   []ageItem
	routes  views
	keySize int
}

func indexesOf(st *State) stateIndexes {
	ix := stateIndexes{routes: viewsOf(st), keySize: st.keys.Len()}
	ix.byHash = ix.routes.keys
	ix.routes.keys = nil
	st.keysByTeam.ascend(func(k *Key) bool { ix.byTeam = append(ix.byTeam, k.TeamID+"/"+k.ID); return true })
	st.keysByCreated.ascend(func(k *Key) bool { ix.byTime = append(ix.byTime, k.ID); return true })
	st.leasesByNode.ascend(func(it leaseItem) bool { ix.leases = append(ix.leases, it); return true })
	st.requestsByAge.ascend(func(it ageItem) bool { ix.byAge = append(ix.byAge, it); return true })
	if st.keysByHash.Len() != len(ix.byHash) {
		ix.keySize = -1 // the trie's count is off
	}
	return ix
}
