package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/node/admin"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// A write a follower's console makes as a user is forwarded to the leader,
// which checks the same session (the nodes share the cluster secret) and
// audits it as that user from the browser's address.
func TestForwardedConsoleWriteIsAuditedAsTheUser(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitCluster(t, nodes, 3, 0)
	var follower *tnode
	for _, tn := range nodes {
		if tn != leader {
			follower = tn
			break
		}
	}
	_, err := pb.NewUserServiceClient(leader.grpcConn()).CreateUser(adminCtx(t), &pb.CreateUserRequest{Name: "olga", Role: raftstore.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}
	var cs string
	eventually(t, 10*time.Second, "the user and the cluster secret on the follower", func() error {
		st := follower.n.Store().State()
		if cs = st.ClusterSecret(); cs == "" || st.User("olga") == nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	session, err := admin.SignConsoleSession(cs, &pb.ConsoleSession{User: "olga", Address: "198.51.100.4:50000",
		ExpiresAt: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", admin.ConsoleScheme+" "+session)
	if _, err := pb.NewTeamServiceClient(follower.grpcConn()).CreateTeam(ctx, &pb.CreateTeamRequest{Name: "via-follower"}); err != nil {
		t.Fatal(err)
	}
	recs := leader.n.Store().State().AuditRecords(raftstore.AuditFilter{User: "olga", Limit: 1})
	if len(recs) != 1 || recs[0].GetAddress() != "198.51.100.4:50000" || recs[0].GetRpc() != pb.TeamService_CreateTeam_FullMethodName ||
		recs[0].GetRole() != raftstore.RoleOperator {
		t.Fatalf("audit records of olga on the leader: %v", recs)
	}
}
