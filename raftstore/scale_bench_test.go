package raftstore

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// bigState returns a state holding n keys, built directly rather than
// through n applies.
func bigState(n int) *State {
	st := emptyState()
	st.Index = 1
	ts := timestamppb.New(timeOf(baseNanos))
	st = st.withKeys(func(kw *keyWriter) {
		for i := range n {
			id := fmt.Sprintf("key_%08d", i)
			if _, err := kw.put(&pb.StoredKey{Key: &pb.Key{Id: id, Name: "name-" + id, SecretPrefix: "tg-x",
				Models: []string{"gpt-4*", "o1"}, CreatedAt: ts, UpdatedAt: ts}, SecretHash: hashOf("secret-" + id)}); err != nil {
				panic(err)
			}
		}
	})
	return st
}

// BenchmarkFSMCreateKey applies one CreateKey log entry (decode, write,
// publish) to an FSM already holding n keys: the cost of a key create must
// not grow with the number of keys.
func BenchmarkFSMCreateKey(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			f := newFSM()
			base := bigState(n)
			data, err := proto.Marshal(at(createKeyCmd("key_new", "secret-new", "gpt-4o"), baseNanos))
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

// BenchmarkFSMRestore restores a streamed snapshot of n keys into a fresh
// FSM, as a node does when it starts or installs a snapshot.
func BenchmarkFSMRestore(b *testing.B) {
	for _, n := range []int{250_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			var buf bytes.Buffer
			if err := writeSnapshot(&buf, bigState(n)); err != nil {
				b.Fatal(err)
			}
			data := buf.Bytes()
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU(b)
			for b.Loop() {
				f := newFSM()
				if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
