package admin

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

func lastAudit(t *testing.T, e *rbacEnv) *pb.AuditRecord {
	t.Helper()
	recs := e.store.State().AuditRecords(raftstore.AuditFilter{Limit: 1})
	if len(recs) == 0 {
		t.Fatal("no audit record")
	}
	return recs[0]
}

func actorMD(t *testing.T, a *pb.Actor) string {
	t.Helper()
	b, err := proto.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A client cannot pass itself off as someone else by sending the actor
// metadata nodes use: without the cluster secret it is ignored.
func TestClientCannotForgeTheActor(t *testing.T) {
	e := startRBAC(t)
	b := actorMD(t, &pb.Actor{User: "operator-user", Address: "10.9.9.9:1"})
	ctx := withMD(ctxT(t), MetadataActor, b, MetadataActorMAC, actorMAC("not-the-cluster-secret", []byte(b)))
	_, err := pb.NewTeamServiceClient(dial(t, e.addr, e.tokens[raftstore.RoleViewer])).CreateTeam(ctx, &pb.CreateTeamRequest{Name: "x"})
	wantCode(t, err, codes.PermissionDenied)
	_, err = pb.NewTeamServiceClient(dial(t, e.addr, e.tokens[raftstore.RoleOperator])).CreateTeam(ctx, &pb.CreateTeamRequest{Name: "x"})
	mustOK(t, err)
	if r := lastAudit(t, e); r.GetUser() != "operator-user" || r.GetAddress() == "10.9.9.9:1" {
		t.Errorf("audit record = %v, want the operator from its own address", r)
	}
}

// A write forwarded by a node carries the caller's own token (which the
// leader authorizes again) and the caller's address in an actor MACed
// with the cluster secret: the leader records that address only when the
// MAC is good and the actor is the token's user.
func TestForwardedCallerIsRecordedWithItsAddress(t *testing.T) {
	e := startRBAC(t)
	ctx := ctxT(t)
	const cs = "cluster-secret-for-tests"
	if _, err := e.store.Apply(ctx, &pb.Command{Op: &pb.Command_SetClusterSecret{SetClusterSecret: &pb.SetClusterSecretCommand{Secret: cs}}}); err != nil {
		t.Fatal(err)
	}
	forwarded := func(token, actorUser, secret string) error {
		b := actorMD(t, &pb.Actor{User: actorUser, Address: "192.0.2.7:5555"})
		fctx := withMD(ctx, MetadataActor, b, MetadataActorMAC, actorMAC(secret, []byte(b)))
		_, err := pb.NewTeamServiceClient(dial(t, e.addr, token)).CreateTeam(fctx, &pb.CreateTeamRequest{Name: "fwd"})
		return err
	}
	op := e.tokens[raftstore.RoleOperator]
	mustOK(t, forwarded(op, "operator-user", cs))
	if r := lastAudit(t, e); r.GetUser() != "operator-user" || r.GetRole() != raftstore.RoleOperator || r.GetAddress() != "192.0.2.7:5555" ||
		r.GetRpc() != pb.TeamService_CreateTeam_FullMethodName {
		t.Errorf("audit record = %v, want the forwarded operator from its address", r)
	}
	for name, call := range map[string]func() error{
		"a MAC under another secret": func() error { return forwarded(op, "operator-user", "guessed") },
		"an actor of another user":   func() error { return forwarded(op, "viewer-user", cs) },
	} {
		mustOK(t, call())
		if r := lastAudit(t, e); r.GetUser() != "operator-user" || !strings.HasPrefix(r.GetAddress(), "127.0.0.1:") {
			t.Errorf("%s: audit record = %v, want the operator from the address the server saw", name, r)
		}
	}
	// The actor never lends its role: a viewer stays a viewer.
	st := wantCode(t, forwarded(e.tokens[raftstore.RoleViewer], raftstore.BootstrapUser, cs), codes.PermissionDenied)
	if !strings.Contains(st.Message(), "teams.write") {
		t.Errorf("refusal %q does not name teams.write", st.Message())
	}
	// The cluster secret is a node's own identity.
	who, err := pb.NewUserServiceClient(dial(t, e.addr, cs)).WhoAmI(ctx, &pb.WhoAmIRequest{})
	mustOK(t, err)
	if who.GetUser() != nodeUser {
		t.Errorf("WhoAmI with the cluster secret = %v", who)
	}
}

func TestTeamAdminStaysWithinItsTeam(t *testing.T) {
	e := startRBAC(t)
	ctx := ctxT(t)
	adm := dial(t, e.addr, testBootstrapToken)
	other, err := pb.NewTeamServiceClient(adm).CreateTeam(ctx, &pb.CreateTeamRequest{Name: "other"})
	mustOK(t, err)
	outside, err := pb.NewKeyServiceClient(adm).CreateKey(ctx, &pb.CreateKeyRequest{Name: "outside", TeamId: other.GetTeam().GetId()})
	mustOK(t, err)
	ta := dial(t, e.addr, e.tokens[raftstore.RoleTeamAdmin])
	keys, teams := pb.NewKeyServiceClient(ta), pb.NewTeamServiceClient(ta)
	allAddr, _, _ := serveAll(t, e.store) // with SpendService

	own, err := keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "mine", Models: []string{"gpt-4o", "gpt-4*"}, Budget: &pb.Budget{LimitNanos: 500, Period: "day"}})
	mustOK(t, err)
	if own.GetKey().GetTeamId() != e.team {
		t.Errorf("a team-admin's key without a team went to %q, want its team %q", own.GetKey().GetTeamId(), e.team)
	}
	ownID, outID := own.GetKey().GetId(), outside.GetKey().GetId()
	for name, call := range map[string]func() error{
		"create in another team": func() error {
			_, err := keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "x", TeamId: other.GetTeam().GetId(), Models: []string{"gpt-4o"}})
			return err
		},
		"create outside its models": func() error {
			_, err := keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "x", Models: []string{"claude-3"}})
			return err
		},
		"create for every model": func() error { _, err := keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "x"}); return err },
		"create over the team budget": func() error {
			_, err := keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "x", Models: []string{"gpt-4o"}, Budget: &pb.Budget{LimitNanos: 5000, Period: "day"}})
			return err
		},
		"import into another team": func() error {
			_, err := keys.ImportKeys(ctx, &pb.ImportKeysRequest{ImportId: "i", Keys: []*pb.ImportedKey{{Name: "x", TeamId: other.GetTeam().GetId(), Models: []string{"gpt-4o"}}}})
			return err
		},
		"get another team's key":    func() error { _, err := keys.GetKey(ctx, &pb.GetKeyRequest{Id: outID}); return err },
		"revoke another team's key": func() error { _, err := keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Id: outID}); return err },
		"rotate another team's key": func() error { _, err := keys.RotateKey(ctx, &pb.RotateKeyRequest{Id: outID}); return err },
		"move its key out": func() error {
			_, err := keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: ownID, TeamId: proto.String("")})
			return err
		},
		"see another team": func() error {
			_, err := teams.GetTeam(ctx, &pb.GetTeamRequest{Id: other.GetTeam().GetId()})
			return err
		},
		"see another team's spend": func() error {
			_, err := pb.NewSpendServiceClient(dial(t, allAddr, e.tokens[raftstore.RoleTeamAdmin])).SpendReport(ctx, &pb.SpendReportRequest{TeamId: other.GetTeam().GetId()})
			return err
		},
		"change its team": func() error {
			_, err := teams.UpdateTeam(ctx, &pb.UpdateTeamRequest{Id: e.team, Name: proto.String("y")})
			return err
		},
	} {
		if st := wantCode(t, call(), codes.PermissionDenied); !strings.Contains(st.Message(), "permission denied") {
			t.Errorf("%s: message %q", name, st.Message())
		}
	}
	list, err := keys.ListKeys(ctx, &pb.ListKeysRequest{})
	mustOK(t, err)
	if len(list.GetKeys()) != 1 || list.GetKeys()[0].GetId() != ownID {
		t.Errorf("a team-admin lists %v, want only its own key", list.GetKeys())
	}
	tl, err := teams.ListTeams(ctx, &pb.ListTeamsRequest{})
	mustOK(t, err)
	if len(tl.GetTeams()) != 1 || tl.GetTeams()[0].GetId() != e.team {
		t.Errorf("a team-admin lists teams %v, want only its own", tl.GetTeams())
	}
	_, err = keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Id: ownID})
	mustOK(t, err)
}

func TestTeamAdminSpendQueriesAreNarrowedToItsTeam(t *testing.T) {
	srv := New(Config{Store: &fakeStore{}})
	id := &Identity{User: "ta", Role: raftstore.RoleTeamAdmin, TeamID: "team_a"}
	for _, req := range []any{&pb.SpendReportRequest{}, &pb.SpendLogsRequest{}, &pb.NodeLogsRequest{}} {
		got, err := srv.scopeRequest(id, req)
		mustOK(t, err)
		team := ""
		switch r := got.(type) {
		case *pb.SpendReportRequest:
			team = r.GetTeamId()
		case *pb.SpendLogsRequest:
			team = r.GetTeamId()
		case *pb.NodeLogsRequest:
			team = r.GetQuery().GetTeamId()
		}
		if team != "team_a" {
			t.Errorf("%T for a team-admin asks for team %q, want team_a", req, team)
		}
	}
}
