package node

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// A key create a client makes through a follower is audited by the
// leader as that client: its user and role, and the address it called
// from (which the follower vouches for with the cluster secret), not the
// follower's own address.
func TestWriteThroughAFollowerIsAuditedWithTheClientsAddress(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitCluster(t, nodes, 3, 0)
	follower := nodes[0]
	if follower == leader {
		follower = nodes[1]
	}
	olga, err := pb.NewUserServiceClient(leader.grpcConn()).CreateUser(adminCtx(t), &pb.CreateUserRequest{Name: "olga", Role: raftstore.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the user and the cluster secret on the follower", func() error {
		if st := follower.n.Store().State(); st.ClusterSecret() == "" || st.User("olga") == nil {
			return errors.New("not yet")
		}
		return nil
	})
	var local atomic.Value // the client's own address, as the follower sees it
	conn, err := grpc.NewClient(follower.n.AdminAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err == nil {
				local.Store(c.LocalAddr().String())
			}
			return c, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = retryUnavailable(10*time.Second, func() error {
		_, err := pb.NewKeyServiceClient(conn).CreateKey(tokenCtx(t, olga.GetToken(), 10*time.Second), &pb.CreateKeyRequest{Name: "via-follower"})
		return err
	})
	if err != nil {
		t.Fatalf("CreateKey through the follower: %v", err)
	}
	if follower.n.Store().IsLeader() {
		t.Skip("the follower became the leader: the write was not forwarded")
	}
	recs := follower.n.Store().State().AuditRecords(raftstore.AuditFilter{User: "olga", Limit: 1})
	if len(recs) != 1 || recs[0].GetAddress() != local.Load() || recs[0].GetRole() != raftstore.RoleOperator ||
		recs[0].GetRpc() != pb.KeyService_CreateKey_FullMethodName {
		t.Fatalf("audit record of the create = %v; want olga, operator, CreateKey, from %v", recs, local.Load())
	}
}
