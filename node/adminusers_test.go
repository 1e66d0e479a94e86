package node

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// soloWithClusterSecret starts one node and waits until it has set the
// cluster secret (in the clear: the node has no secrets key).
func soloWithClusterSecret(t *testing.T) (*tnode, string) {
	t.Helper()
	tn := startNode(t, baseConfig(t, "solo", testLogger(t)))
	tn.waitReady(15 * time.Second)
	var cs string
	eventually(t, 10*time.Second, "the cluster secret", func() error {
		if cs = tn.n.Store().State().ClusterSecret(); cs == "" {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	return tn, cs
}

// A backup is the admin role's, but the cluster secret is the nodes'
// own: with it an admin user could act as a node (call Propose, register
// an admin token unaudited that outlives the user's revocation, vouch for
// any client address in the audit log). A saved snapshot leaves it out;
// restoring one keeps the running cluster's.
func TestASavedSnapshotHoldsNoClusterSecret(t *testing.T) {
	tn, cs := soloWithClusterSecret(t)
	root, err := pb.NewUserServiceClient(tn.grpcConn()).CreateUser(adminCtx(t), &pb.CreateUserRequest{Name: "root", Role: raftstore.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	saved, err := tn.cluster().SaveSnapshot(tokenCtx(t, root.GetToken(), 10*time.Second), &pb.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var snap pb.Snapshot
	if err := proto.Unmarshal(saved.GetData(), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.GetClusterSecret() != "" || bytes.Contains(saved.GetData(), []byte(cs)) {
		t.Fatal("a saved snapshot holds the cluster secret")
	}
	if _, err := tn.cluster().RestoreSnapshot(adminCtx(t), &pb.RestoreSnapshotRequest{Data: saved.GetData()}); err != nil {
		t.Fatal(err)
	}
	if got := tn.n.Store().State().ClusterSecret(); got != cs {
		t.Errorf("after a restore the cluster secret changed")
	}
}

// The nodes' own commands carry no caller, and a command proposed through
// the internal API cannot bring one: it would write an audit record in
// anyone's name.
func TestAProposedCommandWritesNoAuditRecord(t *testing.T) {
	tn, cs := soloWithClusterSecret(t)
	before := tn.n.Store().State().AuditCount()
	h := raftstore.HashSecret("an-admin-token-proposed-by-a-node")
	cmd, err := proto.Marshal(&pb.Command{
		Actor: &pb.Actor{User: "alice", Role: raftstore.RoleAdmin, Address: "192.0.2.1:1", Rpc: pb.KeyService_RevokeKey_FullMethodName},
		Op:    &pb.Command_AddAdminToken{AddAdminToken: &pb.AddAdminTokenCommand{TokenHash: h[:]}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{cs, testAdminToken} {
		if _, err := tn.cluster().Propose(tokenCtx(t, token, 10*time.Second), &pb.ProposeRequest{Command: cmd}); err != nil {
			t.Fatal(err)
		}
	}
	st := tn.n.Store().State()
	if !st.HasAdminToken(h) {
		t.Fatal("the proposed command was not applied")
	}
	if n := st.AuditCount(); n != before {
		t.Errorf("audit records %d, want %d: %v", n, before, st.AuditRecords(raftstore.AuditFilter{Limit: 3}))
	}
}
