package raftstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func importCmd(keys ...*pb.StoredKey) *pb.Command {
	return &pb.Command{Op: &pb.Command_ImportKeys{ImportKeys: &pb.ImportKeysCommand{Keys: keys}}}
}

func newStoredKey(id, secret string) *pb.StoredKey {
	return createKeyCmd(id, secret, "m1").GetCreateKey().GetKey()
}

// TestImportKeysAllOrNone imports batches of keys: new keys are created
// and indexed as CreateKey would, keys whose id exists are skipped, and a
// batch with a bad key (a duplicate id or secret within the batch or with
// a stored key, a missing team) changes nothing and names the key.
func TestImportKeysAllOrNone(t *testing.T) {
	h := newHarness(t)
	h.must(createKeyCmd("old", "old-secret"))
	res := h.must(importCmd(newStoredKey("a", "sa"), newStoredKey("old", "other"), newStoredKey("b", "sb"))).(*pb.ImportKeysResult)
	if fmt.Sprint(res.GetSkipped()) != "[false true false]" {
		t.Fatalf("skipped = %v", res.GetSkipped())
	}
	st := h.state()
	for _, id := range []string{"a", "b"} {
		sk := st.Key(id)
		if sk == nil || sk.GetKey().GetCreatedAt() == nil || st.KeyByHash(HashSecret("s"+id)).ID != id {
			t.Fatalf("imported key %q: %v", id, sk)
		}
	}
	if st.KeyCount() != 3 || len(st.Keys()) != 3 || st.KeyByHash(HashSecret("other")) != nil {
		t.Fatalf("%d keys after the import", st.KeyCount())
	}

	noTeam := newStoredKey("d", "sd")
	noTeam.Key.TeamId = "missing"
	for _, tc := range []struct {
		name string
		keys []*pb.StoredKey
		want error
		at   string
	}{
		{"id twice in the batch", []*pb.StoredKey{newStoredKey("c", "sc"), newStoredKey("c", "sc2")}, ErrAlreadyExists, "key 2 "},
		{"secret twice in the batch", []*pb.StoredKey{newStoredKey("c", "sc"), newStoredKey("d", "sc")}, ErrAlreadyExists, "key 2 "},
		{"secret of a stored key", []*pb.StoredKey{newStoredKey("c", "sc"), newStoredKey("d", "sa")}, ErrAlreadyExists, "key 2 "},
		{"missing team", []*pb.StoredKey{newStoredKey("c", "sc"), noTeam}, ErrFailedPrecondition, "key 2 "},
		{"no id", []*pb.StoredKey{newStoredKey("", "sc")}, ErrInvalid, "key 1 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.state()
			_, err := h.apply(importCmd(tc.keys...))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.at) {
				t.Fatalf("err = %v, want %v at %q", err, tc.want, tc.at)
			}
			if st := h.state(); st.KeyCount() != before.KeyCount() || st.Key("c") != nil || st.KeyByHash(HashSecret("sc")) != nil {
				t.Fatal("a refused batch was half applied")
			}
		})
	}
}

// BenchmarkFSMImportKeys applies one ImportKeys entry of MaxImportBatch
// new keys to an FSM already holding n keys.
func BenchmarkFSMImportKeys(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			f := newFSM()
			base := bigState(n)
			var keys []*pb.StoredKey
			for i := range MaxImportBatch {
				keys = append(keys, newStoredKey(fmt.Sprintf("imp_%05d", i), fmt.Sprintf("imp-secret-%d", i)))
			}
			data, err := proto.Marshal(at(importCmd(keys...), baseNanos))
			if err != nil {
				b.Fatal(err)
			}
			l := &raft.Log{Index: base.Index + 1, Type: raft.LogCommand, Data: data}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f.state.Store(base) // keep the state size fixed
				if res := f.Apply(l).(*applyResult); res.err != nil {
					b.Fatal(res.err)
				}
			}
		})
	}
}
