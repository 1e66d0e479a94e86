package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// fakeAccess serves UserService and AuditService: it records requests and
// answers CreateUser with Unavailable as often as failCreates says.
type fakeAccess struct {
	tollgatev1.UnimplementedUserServiceServer
	tollgatev1.UnimplementedAuditServiceServer
	mu          sync.Mutex
	failCreates int
	creates     []*tollgatev1.CreateUserRequest
	audit       *tollgatev1.ListAuditRequest
}

func (f *fakeAccess) CreateUser(_ context.Context, req *tollgatev1.CreateUserRequest) (*tollgatev1.CreateUserResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, req)
	if f.failCreates > 0 {
		f.failCreates--
		return nil, status.Error(codes.Unavailable, "election in progress")
	}
	return &tollgatev1.CreateUserResponse{
		User:  &tollgatev1.User{Name: req.GetName(), Role: req.GetRole(), TeamId: req.GetTeamId(), TokenPrefix: "tgu-abcdef"},
		Token: "tgu-abcdef-the-token"}, nil
}

func (f *fakeAccess) ListAudit(_ context.Context, req *tollgatev1.ListAuditRequest) (*tollgatev1.ListAuditResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audit = req
	return &tollgatev1.ListAuditResponse{Records: []*tollgatev1.AuditRecord{{
		Index: 42, Time: fakeTime, User: "alice", Role: "operator", Address: "127.0.0.1:5000",
		Rpc: "/tollgate.v1.KeyService/CreateKey", Command: "create_key", Summary: `{key:{key:{id:"key_1"}}}`}}}, nil
}

func (f *fakeAccess) ListUsers(_ context.Context, req *tollgatev1.ListUsersRequest) (*tollgatev1.ListUsersResponse, error) {
	users := []*tollgatev1.User{{Name: "alice", Role: "operator", TokenPrefix: "tgu-aaaaaa", CreatedAt: fakeTime}}
	if req.GetIncludeRevoked() {
		users = append(users, &tollgatev1.User{Name: "old", Role: "viewer", TokenPrefix: "tgu-oooooo", RevokedAt: fakeTime})
	}
	return &tollgatev1.ListUsersResponse{Users: users}, nil
}

func (f *fakeAccess) GetUser(_ context.Context, req *tollgatev1.GetUserRequest) (*tollgatev1.GetUserResponse, error) {
	if req.GetName() != "bob" {
		return nil, status.Errorf(codes.NotFound, "user %q not found", req.GetName())
	}
	return &tollgatev1.GetUserResponse{User: &tollgatev1.User{Name: "bob", Role: "team-admin", TeamId: "team_1",
		Models: []string{"gpt-4o*"}, TokenPrefix: "tgu-bbbbbb", CreatedBy: "bootstrap"}}, nil
}

func (f *fakeAccess) RotateUser(_ context.Context, req *tollgatev1.RotateUserRequest) (*tollgatev1.RotateUserResponse, error) {
	return &tollgatev1.RotateUserResponse{User: &tollgatev1.User{Name: req.GetName(), Role: "operator"}, Token: "tgu-rotated-token"}, nil
}

func (f *fakeAccess) RevokeUser(_ context.Context, req *tollgatev1.RevokeUserRequest) (*tollgatev1.RevokeUserResponse, error) {
	return &tollgatev1.RevokeUserResponse{User: &tollgatev1.User{Name: req.GetName(), Role: "operator", RevokedAt: fakeTime}}, nil
}

func (f *fakeAccess) WhoAmI(context.Context, *tollgatev1.WhoAmIRequest) (*tollgatev1.WhoAmIResponse, error) {
	return &tollgatev1.WhoAmIResponse{User: "bootstrap", Role: "admin", Permissions: []string{"keys.read", "users.write"}}, nil
}

func startFakeAccess(t *testing.T) (*fake, *fakeAccess) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fa := &fakeAccess{}
	srv := grpc.NewServer(grpc.UnaryInterceptor(checkToken))
	tollgatev1.RegisterUserServiceServer(srv, fa)
	tollgatev1.RegisterAuditServiceServer(srv, fa)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return &fake{addr: lis.Addr().String()}, fa
}

func TestUserCreatePrintsTheTokenOnceAndRetriesWithTheSameSeed(t *testing.T) {
	f, fa := startFakeAccess(t)
	fa.failCreates = 1
	r := f.mustRun(t, "user", "create", "bob", "--role", "team-admin", "--team", "team_1", "--models", "gpt-4o, claude-*", "-o", "json")
	m := decodeObject(t, r.stdout)
	if m["token"] != "tgu-abcdef-the-token" || m["name"] != "bob" || m["role"] != "team-admin" {
		t.Errorf("json = %v", m)
	}
	if !strings.Contains(r.stderr, "shown only once") {
		t.Errorf("stderr lacks the warning: %q", r.stderr)
	}
	if len(fa.creates) != 2 {
		t.Fatalf("%d CreateUser calls, want a failed one and its retry", len(fa.creates))
	}
	a, b := fa.creates[0], fa.creates[1]
	if len(a.GetTokenSeed()) != secretSeedLen || !bytes.Equal(a.GetTokenSeed(), b.GetTokenSeed()) {
		t.Errorf("token seeds %x and %x: want the same %d bytes on the retry", a.GetTokenSeed(), b.GetTokenSeed(), secretSeedLen)
	}
	if got := strings.Join(b.GetModels(), ","); got != "gpt-4o,claude-*" || b.GetTeamId() != "team_1" {
		t.Errorf("request = %v", b)
	}
	table := f.mustRun(t, "user", "create", "carol", "--role", "viewer")
	if !strings.Contains(table.stdout, "Token: tgu-abcdef-the-token") || !strings.Contains(table.stdout, "shown only once") {
		t.Errorf("table output:\n%s", table.stdout)
	}
	if r := f.run(t, "user", "create", "dave"); r.code != 2 || !strings.Contains(r.stderr, "role") {
		t.Errorf("create without --role: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestAuditFiltersAndPrintsJSON(t *testing.T) {
	f, fa := startFakeAccess(t)
	before := time.Now()
	r := f.mustRun(t, "audit", "--user", "alice", "--since", "7d", "-o", "json")
	recs := decodeArray(t, r.stdout)
	if len(recs) != 1 || recs[0]["user"] != "alice" || recs[0]["index"] != "42" ||
		recs[0]["time"] != fakeTime.AsTime().Format(time.RFC3339) || recs[0]["rpc"] != "/tollgate.v1.KeyService/CreateKey" {
		t.Errorf("json = %v", recs)
	}
	want := before.Add(-7 * 24 * time.Hour).Unix()
	if fa.audit.GetUser() != "alice" || fa.audit.GetSince() < want-5 || fa.audit.GetSince() > want+5 || fa.audit.GetLimit() != 100 {
		t.Errorf("request = %v, want user alice since about %d", fa.audit, want)
	}
	table := f.mustRun(t, "audit")
	for _, w := range []string{"alice", "127.0.0.1:5000", "KeyService/CreateKey", "ok"} {
		if !strings.Contains(table.stdout, w) {
			t.Errorf("table lacks %q:\n%s", w, table.stdout)
		}
	}
	if r := f.run(t, "audit", "--since", "soon"); r.code != 2 {
		t.Errorf("--since soon: exit %d", r.code)
	}
}

func TestUserListGetRotateRevokeWhoAmI(t *testing.T) {
	f, _ := startFakeAccess(t)
	if out := f.mustRun(t, "user", "list").stdout; !strings.Contains(out, "alice") || strings.Contains(out, "old") {
		t.Errorf("user list:\n%s", out)
	}
	if all := decodeArray(t, f.mustRun(t, "user", "list", "--all", "-o", "json").stdout); len(all) != 2 || all[1]["revoked_at"] == nil {
		t.Errorf("user list --all -o json = %v", all)
	}
	out := f.mustRun(t, "user", "get", "bob").stdout
	for _, w := range []string{"team-admin", "team_1", "gpt-4o*", "tgu-bbbbbb…", "by bootstrap"} {
		if !strings.Contains(out, w) {
			t.Errorf("user get lacks %q:\n%s", w, out)
		}
	}
	if r := f.run(t, "user", "get", "nobody"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("user get nobody: exit %d, %q", r.code, r.stderr)
	}
	if m := decodeObject(t, f.mustRun(t, "user", "rotate", "alice", "-o", "json").stdout); m["token"] != "tgu-rotated-token" {
		t.Errorf("user rotate -o json = %v", m)
	}
	if out := f.mustRun(t, "user", "revoke", "alice").stdout; out != "Revoked user alice.\n" {
		t.Errorf("user revoke: %q", out)
	}
	if out := f.mustRun(t, "user", "whoami").stdout; !strings.Contains(out, "bootstrap") || !strings.Contains(out, "keys.read, users.write") {
		t.Errorf("user whoami:\n%s", out)
	}
}
