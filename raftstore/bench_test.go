package raftstore

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
)

// stateWithKeys returns an FSM holding n keys with secrets "secret-<i>".
func stateWithKeys(b *testing.B, n int) *harness {
	h := newHarness(b)
	for i := range n {
		h.must(createKeyCmd(fmt.Sprintf("key_%d", i), fmt.Sprintf("secret-%d", i), "gpt-4*", "o1", "*-mini"))
	}
	return h
}

// BenchmarkStateKeyByHash is the data plane's auth lookup: load the
// published state, find the key by the secret's hash, check the model.
func BenchmarkStateKeyByHash(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			h := stateWithKeys(b, n)
			hashes := make([][32]byte, 1024)
			for i := range hashes {
				hashes[i] = HashSecret(fmt.Sprintf("secret-%d", i*7919%n))
			}
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				k := h.f.state.Load().KeyByHash(hashes[i%len(hashes)])
				if k == nil || k.Revoked || k.Expired(baseNanos) || !k.Allows("gpt-4o-mini") {
					b.Fatal("lookup failed")
				}
				i++
			}
		})
	}
}

// BenchmarkApplyCreateKey applies one CreateKey log entry (decode, copy on
// write, publish) to an FSM already holding n keys.
func BenchmarkApplyCreateKey(b *testing.B) {
	for _, n := range []int{0, 1_000, 10_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			h := stateWithKeys(b, n)
			base := h.state()
			data, err := proto.Marshal(at(createKeyCmd("key_new", "secret-new", "gpt-4o"), baseNanos))
			if err != nil {
				b.Fatal(err)
			}
			l := &raft.Log{Index: base.Index + 1, Type: raft.LogCommand, Data: data}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				h.f.state.Store(base) // keep the state size fixed
				if res := h.f.Apply(l).(*applyResult); res.err != nil {
					b.Fatal(res.err)
				}
			}
		})
	}
}
