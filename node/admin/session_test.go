package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

const testClusterSecret = "cluster-secret-for-console-tests"

// consoleAuth sends a console session as the call's authorization.
type consoleAuth string

func (c consoleAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": ConsoleScheme + " " + string(c)}, nil
}

func (consoleAuth) RequireTransportSecurity() bool { return false }

func startConsoleRBAC(t *testing.T) *rbacEnv {
	t.Helper()
	e := startRBAC(t)
	if _, err := e.store.Apply(ctxT(t), &pb.Command{Op: &pb.Command_SetClusterSecret{
		SetClusterSecret: &pb.SetClusterSecretCommand{Secret: testClusterSecret}}}); err != nil {
		t.Fatal(err)
	}
	return e
}

func signed(t *testing.T, secret string, s *pb.ConsoleSession) string {
	t.Helper()
	if s.ExpiresAt == 0 {
		s.ExpiresAt = time.Now().Add(time.Hour).Unix()
	}
	v, err := SignConsoleSession(secret, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func teamsAs(t *testing.T, e *rbacEnv, session string) pb.TeamServiceClient {
	t.Helper()
	return pb.NewTeamServiceClient(dialConsole(t, e, session))
}

func dialConsole(t *testing.T, e *rbacEnv, session string) *grpc.ClientConn {
	t.Helper()
	return dialConsoleAt(t, e.addr, session)
}

func dialConsoleAt(t *testing.T, addr, session string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(consoleAuth(session)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// A local user's console session acts as that user, with the role the
// replicated state gives it (not the one in the session), and the audit
// log shows the browser's address.
func TestConsoleSessionActsAsTheUserFromItsBrowserAddress(t *testing.T) {
	e := startConsoleRBAC(t)
	ctx := ctxT(t)
	s := signed(t, testClusterSecret, &pb.ConsoleSession{User: "operator-user", Role: raftstore.RoleAdmin, Address: "203.0.113.9:4444"})
	_, err := teamsAs(t, e, s).CreateTeam(ctx, &pb.CreateTeamRequest{Name: "from-console"})
	mustOK(t, err)
	if r := lastAudit(t, e); r.GetUser() != "operator-user" || r.GetRole() != raftstore.RoleOperator || r.GetAddress() != "203.0.113.9:4444" {
		t.Errorf("audit record = %v, want operator-user as operator from 203.0.113.9:4444", r)
	}
	// The operator role, not the admin the session claims.
	_, err = pb.NewUserServiceClient(dialConsole(t, e, s)).CreateUser(ctx, &pb.CreateUserRequest{Name: "x", Role: raftstore.RoleViewer})
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), "users.write") {
		t.Errorf("refusal %q does not name users.write", st.Message())
	}
}

func TestConsoleSessionRefusedWhenTamperedExpiredOrRevoked(t *testing.T) {
	e := startConsoleRBAC(t)
	ctx := ctxT(t)
	good := signed(t, testClusterSecret, &pb.ConsoleSession{User: "viewer-user"})
	_, err := teamsAs(t, e, good).ListTeams(ctx, &pb.ListTeamsRequest{})
	mustOK(t, err)
	body, mac, _ := strings.Cut(good, ".")
	other := signed(t, testClusterSecret, &pb.ConsoleSession{User: "operator-user"})
	otherBody, _, _ := strings.Cut(other, ".")
	flipped := []byte(body)
	flipped[3] ^= 1
	bootstrapOIDC := signed(t, testClusterSecret, &pb.ConsoleSession{User: raftstore.BootstrapUser, Role: raftstore.RoleAdmin, Oidc: true})
	for name, s := range map[string]string{
		"another session's body": otherBody + "." + mac,
		"a changed byte":         string(flipped) + "." + mac,
		"no MAC":                 body,
		"another secret":         signed(t, "guessed-secret", &pb.ConsoleSession{User: "viewer-user"}),
		"expired":                signed(t, testClusterSecret, &pb.ConsoleSession{User: "viewer-user", ExpiresAt: time.Now().Add(-time.Second).Unix()}),
		"unknown user":           signed(t, testClusterSecret, &pb.ConsoleSession{User: "nobody"}),
		"oidc without prefix":    bootstrapOIDC,
		"oidc with no role":      signed(t, testClusterSecret, &pb.ConsoleSession{User: "oidc:a@b", Oidc: true}),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := teamsAs(t, e, s).ListTeams(ctx, &pb.ListTeamsRequest{})
			wantCode(t, err, codes.Unauthenticated)
		})
	}
	// Revoking the user ends the session at once.
	_, err = pb.NewUserServiceClient(dial(t, e.addr, testBootstrapToken)).RevokeUser(ctx, &pb.RevokeUserRequest{Name: "viewer-user"})
	mustOK(t, err)
	_, err = teamsAs(t, e, good).ListTeams(ctx, &pb.ListTeamsRequest{})
	wantCode(t, err, codes.Unauthenticated)
	if strings.Contains(e.logs.String(), mac) {
		t.Error("the log holds a session's MAC")
	}
}

// A single sign-on user has the role the console mapped at login.
func TestConsoleOIDCSessionHasItsMappedRole(t *testing.T) {
	e := startConsoleRBAC(t)
	ctx := ctxT(t)
	s := signed(t, testClusterSecret, &pb.ConsoleSession{User: "oidc:ann@example.com", Role: raftstore.RoleViewer, Oidc: true})
	who, err := pb.NewUserServiceClient(dialConsole(t, e, s)).WhoAmI(ctx, &pb.WhoAmIRequest{})
	mustOK(t, err)
	if who.GetUser() != "oidc:ann@example.com" || who.GetRole() != raftstore.RoleViewer {
		t.Errorf("WhoAmI = %v", who)
	}
	_, err = teamsAs(t, e, s).CreateTeam(ctx, &pb.CreateTeamRequest{Name: "x"})
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), "teams.write") {
		t.Errorf("refusal %q does not name teams.write", st.Message())
	}
}

// The bootstrap token's console session is an admin, but not the nodes'.
func TestConsoleBootstrapSessionIsAdminButNotInternal(t *testing.T) {
	e := startConsoleRBAC(t)
	ctx := ctxT(t)
	s := signed(t, testClusterSecret, &pb.ConsoleSession{User: raftstore.BootstrapUser})
	_, err := teamsAs(t, e, s).CreateTeam(ctx, &pb.CreateTeamRequest{Name: "boot"})
	mustOK(t, err)
	all, _, _ := serveAll(t, e.store)
	_, err = pb.NewClusterServiceClient(dialConsoleAt(t, all, s)).Propose(ctx, &pb.ProposeRequest{})
	wantCode(t, err, codes.PermissionDenied)
}

func TestViewerThroughTheConsoleNeverSeesASecret(t *testing.T) {
	e := startConsoleRBAC(t)
	examples, secrets := secretsFixture(t, e)
	s := signed(t, testClusterSecret, &pb.ConsoleSession{User: "viewer-user"})
	secrets = append(secrets, s)
	viewerReadsNoSecret(t, e, dialConsole(t, e, s), examples, secrets)
}
