package admin

import (
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// The nodes' internal RPCs are told apart by how the caller
// authenticated (the cluster secret, the bootstrap token), not by a name
// a user can carry: no user is called "node", and a user with a
// reserved name (which only a restored backup can bring) is still a user.
func TestAUserNamedLikeANodeIsNotANode(t *testing.T) {
	e := startRBAC(t)
	ctx := ctxT(t)
	users := pb.NewUserServiceClient(dial(t, e.addr, testBootstrapToken))
	_, err := users.CreateUser(ctx, &pb.CreateUserRequest{Name: nodeUser, Role: raftstore.RoleAdmin})
	wantCode(t, err, codes.InvalidArgument)

	snap := e.store.State().Snapshot()
	tokens := map[string]string{nodeUser: "tgu-restored-node-user-token", raftstore.BootstrapUser: "tgu-restored-bootstrap-token"}
	for name, token := range tokens {
		h := raftstore.HashSecret(token)
		snap.Users = append(snap.Users, &pb.StoredUser{User: &pb.User{Name: name, Role: raftstore.RoleAdmin}, TokenHash: h[:]})
	}
	if _, err := e.store.Apply(ctx, &pb.Command{Op: &pb.Command_Restore{Restore: &pb.RestoreCommand{Snapshot: snap}}}); err != nil {
		t.Fatal(err)
	}
	addr, _, _ := serveAll(t, e.store)
	for name, token := range tokens {
		_, err := pb.NewClusterServiceClient(dial(t, addr, token)).Propose(ctx, &pb.ProposeRequest{})
		wantCode(t, err, codes.PermissionDenied) // the stub would answer Unimplemented past the check
		_, err = pb.NewClusterServiceClient(dial(t, addr, token)).WaitApplied(ctx, &pb.WaitAppliedRequest{})
		if code := wantCode(t, err, codes.PermissionDenied); code.Message() == "" {
			t.Errorf("user %s: empty refusal", name)
		}
	}
}
