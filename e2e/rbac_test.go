package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/tollgate/tollgate/node/admin"
)

type auditRecord struct {
	Index   string `json:"index"`
	User    string `json:"user"`
	Role    string `json:"role"`
	Address string `json:"address"`
	RPC     string `json:"rpc"`
	Command string `json:"command"`
	Summary string `json:"summary"`
	Error   string `json:"error"`
}

// audit reads g's audit log through tollctl with the given token.
func (g *gateway) audit(t *testing.T, token string, args ...string) []auditRecord {
	t.Helper()
	out := g.as(t, token, append([]string{"audit", "-o", "json", "--limit", "1000"}, args...)...)
	var recs []auditRecord
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("audit -o json: %v: %s", err, out)
	}
	return recs
}

// as runs tollctl against g with another token; it fails the test on a
// non-zero exit.
func (g *gateway) as(t *testing.T, token string, args ...string) string {
	t.Helper()
	out, errOut, code := g.ctlAs(token, args...)
	if code != 0 {
		t.Fatalf("tollctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func (g *gateway) ctlAs(token string, args ...string) (string, string, int) {
	saved := g.token
	g.token = token
	defer func() { g.token = saved }()
	return g.ctlCode(args...)
}

// TestRolesAndAuditAcrossTheCluster runs over three real nodes: users of
// every role call every admin RPC on a follower (refused, before any
// forwarding, exactly when the role lacks the permission), forwarded
// writes are recorded under the original caller, cluster writes are
// audited, the log survives a restart, and a viewer sees no secret.
func TestRolesAndAuditAcrossTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three nodes")
	}
	const boot = "rbac-bootstrap-token"
	nodes, _, leaderID := startCluster3(t, boot)
	var leader, follower *gateway
	for _, g := range nodes {
		if g.id == leaderID {
			leader = g
		} else if follower == nil {
			follower = g
		}
	}

	var team struct{ ID string }
	mustJSON(t, follower.ctl(t, "team", "create", "--name", "red", "-o", "json"), &team)
	tokens := map[string]string{"admin": boot}
	for _, role := range []string{"operator", "viewer", "team-admin"} {
		args := []string{"user", "create", role + "-user", "--role", role, "-o", "json"}
		if role == "team-admin" {
			args = append(args, "--team", team.ID, "--models", "gpt-*")
		}
		var u struct{ Token, Role string }
		mustJSON(t, follower.ctl(t, args...), &u)
		if !strings.HasPrefix(u.Token, "tgu-") || u.Role != role {
			t.Fatalf("user create %s: %+v", role, u)
		}
		tokens[role] = u.Token
	}

	t.Run("every role against every RPC on a follower", func(t *testing.T) {
		for role, token := range tokens {
			checkRoleMatrix(t, follower.admin, role, token)
		}
	})

	// A forwarded write is recorded under its caller, a refused one not
	// at all.
	var key struct{ ID, Secret string }
	mustJSON(t, follower.as(t, tokens["operator"], "key", "create", "--name", "svc", "-o", "json"), &key)
	_, errOut, code := follower.ctlAs(tokens["viewer"], "key", "revoke", key.ID)
	if code != 1 || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, "keys.write") {
		t.Errorf("a viewer's revoke: exit %d, %s", code, errOut)
	}
	follower.as(t, tokens["operator"], "key", "create", "--name", "svc-2")
	recs := leader.audit(t, tokens["viewer"], "--user", "operator-user")
	if len(recs) != 2 || recs[1].RPC != "/tollgate.v1.KeyService/CreateKey" || recs[1].Role != "operator" ||
		!strings.HasPrefix(recs[1].Address, "127.0.0.1:") || !strings.Contains(recs[1].Summary, key.ID) {
		t.Errorf("the operator's records on the leader = %+v", recs)
	}
	// Each tollctl run connects from a port of its own, while the follower
	// forwards over one connection: the leader recorded the clients'
	// addresses, which the follower vouched for.
	if len(recs) == 2 && recs[0].Address == recs[1].Address {
		t.Errorf("two tollctl runs recorded from one address %s: the forwarding node's, not the client's", recs[0].Address)
	}

	// Cluster writes: a restore and a node removal.
	backup := filepath.Join(t.TempDir(), "backup.snap")
	follower.ctl(t, "cluster", "snapshot", "save", backup)
	follower.ctl(t, "cluster", "snapshot", "restore", backup, "--yes")
	follower.ctl(t, "cluster", "remove", "ghost")
	byRPC := map[string]auditRecord{}
	for _, r := range leader.audit(t, boot, "--since", "1h") {
		byRPC[r.RPC] = r
	}
	for _, rpc := range []string{"/tollgate.v1.ClusterService/RestoreSnapshot", "/tollgate.v1.ClusterService/RemoveNode",
		"/tollgate.v1.UserService/CreateUser", "/tollgate.v1.TeamService/CreateTeam"} {
		if r, ok := byRPC[rpc]; !ok || r.User != "bootstrap" {
			t.Errorf("no record of %s by bootstrap: %+v", rpc, r)
		}
	}

	// A restarted node has the same log.
	want := leader.audit(t, boot)
	follower.stop(t)
	follower.start(t)
	waitFor(t, 15*time.Second, "the restarted node's audit log to match the leader's", func() bool {
		out, _, code := follower.ctlAs(boot, "audit", "-o", "json", "--limit", "1000")
		var got []auditRecord
		return code == 0 && json.Unmarshal([]byte(out), &got) == nil && len(got) >= len(want) &&
			got[len(got)-len(want)] == want[0]
	})

	// A viewer sees no key secret and no credential value anywhere.
	const credValue = "sk-e2e-credential-value-QZXW"
	cmd := exec.Command(bin.tollctl, "credential", "set", "openai")
	cmd.Env = []string{"TOLLGATE_ADDR=" + follower.admin, "TOLLGATE_TOKEN=" + tokens["operator"]}
	cmd.Stdin = strings.NewReader(credValue)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("credential set: %v: %s", err, out)
	}
	for _, args := range [][]string{{"key", "list", "-o", "json"}, {"key", "get", key.ID, "-o", "json"},
		{"credential", "list", "-o", "json"}, {"credential", "list"}, {"model", "list", "-o", "json"},
		{"team", "list", "-o", "json"}, {"audit", "-o", "json"}, {"cluster", "status", "-o", "json"}} {
		out := follower.as(t, tokens["viewer"], args...)
		for _, secret := range []string{key.Secret, credValue, "QZXW", tokens["operator"], boot} {
			if strings.Contains(out, secret) {
				t.Errorf("a viewer's %s shows a secret (%.8s…)", strings.Join(args, " "), secret)
			}
		}
	}
}

// checkRoleMatrix calls every RPC of the descriptors on the node at addr
// with token: PermissionDenied naming a permission comes back exactly when
// the role lacks it.
func checkRoleMatrix(t *testing.T, addr, role, token string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := 0
	protoregistry.GlobalFiles.RangeFilesByPackage("tollgate.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				m := "/" + string(sd.FullName()) + "/" + string(md.Name())
				perm, allowed, known := admin.RoleAllows(role, m)
				if !known {
					t.Errorf("%s has no access rule", m)
					continue
				}
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token), 10*time.Second)
				err := conn.Invoke(ctx, m, newMsg(t, md.Input()), newMsg(t, md.Output()))
				cancel()
				msg := status.Convert(err).Message()
				denied := status.Code(err) == codes.PermissionDenied && strings.Contains(msg, "needs the permission")
				if denied != !allowed || (denied && !strings.Contains(msg, string(perm))) {
					t.Errorf("%s calling %s: %v; want refused for lacking %q: %v", role, m, err, perm, !allowed)
				}
				n++
			}
		}
		return true
	})
	if n < 40 {
		t.Errorf("only %d RPCs in the descriptors", n)
	}
}

func newMsg(t *testing.T, md protoreflect.MessageDescriptor) any {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}
