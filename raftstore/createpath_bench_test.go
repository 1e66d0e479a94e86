package raftstore

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// BenchmarkFSMCreateKeyAdmin applies key creates one after another as the
// admin API proposes them (a request id, an actor for the audit log, the
// leader's time) to a state of 1,000 keys that keeps what they leave:
// the remembered request ids and the audit records grow as in
// `e2e/bench -scale 1000 -scale-creates 2000` (run it with
// -benchtime 2000x for that).
func BenchmarkFSMCreateKeyAdmin(b *testing.B) {
	f := newFSM()
	base := bigState(1_000)
	f.state.Store(base)
	actor := &pb.Actor{User: "bootstrap", Role: "admin", Address: "127.0.0.1:40000", Rpc: "/tollgate.v1.KeyService/CreateKey"}
	idx := base.Index
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		cmd := at(createKeyCmd(fmt.Sprintf("key_%016x", i), fmt.Sprintf("secret-new-%d", i), "gpt-4o"), baseNanos+int64(i)*1e6)
		cmd.RequestId = fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15)
		cmd.Actor = actor
		data, err := proto.Marshal(cmd)
		if err != nil {
			b.Fatal(err)
		}
		idx++
		if res := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data}).(*applyResult); res.err != nil {
			b.Fatal(res.err)
		}
	}
}
