package raftstore

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

var adminActor = &pb.Actor{User: "bootstrap", Role: "admin", Address: "127.0.0.1:40000", Rpc: "/tollgate.v1.KeyService/CreateKey"}

// applyAdminCreates applies n key creates as the admin API proposes them
// (a request id, an actor, the leader's time), from the entry after
// *idx, numbering the keys from *i.
func applyAdminCreates(t testing.TB, f *fsm, idx *uint64, i *int, n int) {
	t.Helper()
	for range n {
		*i++
		cmd := at(createKeyCmd(fmt.Sprintf("key_%016x", *i), fmt.Sprintf("secret-new-%d", *i), "gpt-4o"), baseNanos+int64(*i)*1e6)
		cmd.RequestId = fmt.Sprintf("%032x", uint64(*i)*0x9e3779b97f4a7c15)
		cmd.Actor = adminActor
		data, err := proto.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		*idx++
		if res := f.Apply(&raft.Log{Index: *idx, Type: raft.LogCommand, Data: data}).(*applyResult); res.err != nil {
			t.Fatal(res.err)
		}
	}
}

// An admin write appends to the remembered request ids and the audit log
// and trims their oldest; those copy-on-write trees must copy small nodes,
// or their path copies are most of the state machine's garbage per key
// create (about 9 KB more per create with degree-32 nodes).
func TestAdminKeyCreateGarbageStaysSmallOnceTheBoundsTrim(t *testing.T) {
	defer func(r, a int) { maxAppliedRequests, auditMaxRecords = r, a }(maxAppliedRequests, auditMaxRecords)
	maxAppliedRequests, auditMaxRecords = 3_000, 3_000
	f := newFSM()
	base := bigState(1_000)
	f.state.Store(base)
	idx, i := base.Index, 0
	applyAdminCreates(t, f, &idx, &i, 4_000) // both bounds now trim on every write
	if got := f.state.Load().AuditCount(); got != auditMaxRecords {
		t.Fatalf("audit records = %d, want the bound %d", got, auditMaxRecords)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 2_000
	applyAdminCreates(t, f, &idx, &i, n)
	runtime.ReadMemStats(&after)
	perCreate := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d B allocated per create", perCreate)
	if perCreate > 22_000 {
		t.Fatalf("a key create allocates %d B in the state machine, want at most 22,000 (18 KB with degree-8 nodes, 27 KB with degree 32)", perCreate)
	}
}
