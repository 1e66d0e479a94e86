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
