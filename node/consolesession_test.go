package node

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// A write a follower's console makes as a user is forwarded to the leader,
// which checks the same session (the nodes share the cluster secret) and
// audits it as that user from the browser's address.
func TestForwardedConsoleWriteIsAuditedAsTheUser(t *testing.T) {
	nodes := startCluster(t, 3, func(c *Config) { c.Console.Addr = "127.0.0.1:0" })
	leader := waitCluster(t, nodes, 3, 0)
	var follower *tnode
	for _, tn := range nodes {
		if tn != leader {
			follower = tn
			break
		}
	}
	olga, err := pb.NewUserServiceClient(leader.grpcConn()).CreateUser(adminCtx(t), &pb.CreateUserRequest{Name: "olga", Role: raftstore.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the user and the cluster secret on the follower", func() error {
		st := follower.n.Store().State()
		if st.ClusterSecret() == "" || st.User("olga") == nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	base := "http://" + follower.n.ConsoleAddr()
	hc, csrf := consoleLogin(t, base, olga.GetToken())
	resp, body := consolePost(t, hc, base+"/api/rpc/tollgate.v1.TeamService/CreateTeam", `{"name":"via-follower"}`, csrf)
	if resp.StatusCode != 200 {
		t.Fatalf("CreateTeam through the follower's console: %d %s", resp.StatusCode, body)
	}
	recs := leader.n.Store().State().AuditRecords(raftstore.AuditFilter{User: "olga", Limit: 1})
	if len(recs) != 1 || !strings.HasPrefix(recs[0].GetAddress(), "127.0.0.1:") || recs[0].GetRpc() != pb.TeamService_CreateTeam_FullMethodName ||
		recs[0].GetRole() != raftstore.RoleOperator {
		t.Fatalf("audit records of olga on the leader: %v", recs)
	}
	// The session the follower signed works on the leader's console too.
	u, _ := url.Parse(base)
	jar2, _ := cookiejar.New(nil)
	lu, _ := url.Parse("http://" + leader.n.ConsoleAddr())
	jar2.SetCookies(lu, hc.Jar.Cookies(u))
	r2, err := (&http.Client{Jar: jar2, Timeout: 10 * time.Second}).Get(lu.String() + "/api/session")
	if err != nil {
		t.Fatal(err)
	}
	_ = r2.Body.Close()
	if r2.StatusCode != 200 {
		t.Fatalf("the follower's session on the leader's console: %d", r2.StatusCode)
	}
}
