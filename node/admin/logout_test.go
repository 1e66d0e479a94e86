package admin

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// sameBytesVariant returns signed with the last character of its MAC
// changed in the bits base64 drops: it decodes to the same bytes, so it
// opens as the same session.
func sameBytesVariant(t *testing.T, signed string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, signed[len(signed)-1])
	if last < 0 {
		t.Fatalf("not base64url: %q", signed)
	}
	return signed[:len(signed)-1] + string(alphabet[last^1])
}

// Logging out ends the session for every copy of its cookie (also one
// spelt differently that opens to the same bytes), and only that session:
// another session of the same user goes on working.
func TestEndConsoleSessionRefusesThatSessionOnly(t *testing.T) {
	e := startConsoleRBAC(t)
	ctx := ctxT(t)
	nonce := ConsoleTokenBinding(e.tokens[raftstore.RoleOperator])
	s := signed(t, testClusterSecret, &pb.ConsoleSession{User: "operator-user", Nonce: nonce})
	other := signed(t, testClusterSecret, &pb.ConsoleSession{User: "operator-user", Nonce: nonce, ExpiresAt: time.Now().Add(2 * time.Hour).Unix()})
	variant := sameBytesVariant(t, s)
	_, err := teamsAs(t, e, variant).ListTeams(ctx, &pb.ListTeamsRequest{})
	mustOK(t, err)
	_, err = pb.NewUserServiceClient(dialConsole(t, e, s)).EndConsoleSession(ctx, &pb.EndConsoleSessionRequest{})
	mustOK(t, err)
	for name, sess := range map[string]string{"the session": s, "a variant of its text": variant} {
		_, err = teamsAs(t, e, sess).ListTeams(ctx, &pb.ListTeamsRequest{})
		if st := wantCode(t, err, codes.Unauthenticated); !strings.Contains(st.Message(), "logged out") {
			t.Errorf("%s: refusal %q does not say it was logged out", name, st.Message())
		}
	}
	_, err = teamsAs(t, e, other).ListTeams(ctx, &pb.ListTeamsRequest{})
	mustOK(t, err)
	r := lastAudit(t, e)
	_, mac, _ := strings.Cut(s, ".")
	if r.GetUser() != "operator-user" || r.GetRpc() != pb.UserService_EndConsoleSession_FullMethodName || strings.Contains(r.String(), mac) {
		t.Errorf("audit record of the logout = %v", r)
	}
}

func TestEndConsoleSessionEndsBootstrapAndSingleSignOnSessions(t *testing.T) {
	e := startConsoleRBAC(t)
	ctx := ctxT(t)
	for name, sess := range map[string]*pb.ConsoleSession{
		"bootstrap":      {User: raftstore.BootstrapUser},
		"single sign-on": {User: "oidc:ann@example.com", Role: raftstore.RoleViewer, Oidc: true},
	} {
		s := signed(t, testClusterSecret, sess)
		_, err := pb.NewUserServiceClient(dialConsole(t, e, s)).EndConsoleSession(ctx, &pb.EndConsoleSessionRequest{})
		mustOK(t, err)
		_, err = teamsAs(t, e, s).ListTeams(ctx, &pb.ListTeamsRequest{})
		if st := wantCode(t, err, codes.Unauthenticated); !strings.Contains(st.Message(), "logged out") {
			t.Errorf("%s: refusal %q", name, st.Message())
		}
	}
	// The token itself is not a session and is not ended.
	_, err := pb.NewTeamServiceClient(dial(t, e.addr, testBootstrapToken)).ListTeams(ctx, &pb.ListTeamsRequest{})
	mustOK(t, err)
}

func TestEndConsoleSessionWithATokenIsRefused(t *testing.T) {
	e := startConsoleRBAC(t)
	_, err := pb.NewUserServiceClient(dial(t, e.addr, e.tokens[raftstore.RoleViewer])).EndConsoleSession(ctxT(t), &pb.EndConsoleSessionRequest{})
	if st := wantCode(t, err, codes.FailedPrecondition); !strings.Contains(st.Message(), "only a web console session") {
		t.Errorf("refusal %q", st.Message())
	}
	if n := e.store.State().EndedConsoleSessions(); n != 0 {
		t.Fatalf("%d sessions ended by a token's call", n)
	}
}
