package admin

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

func TestAuth(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)

	// A token registered in the replicated state, as the node does on
	// first start.
	const registered = "registered-admin-token"
	h := raftstore.HashSecret(registered)
	if _, err := store.Apply(ctx, &pb.Command{Op: &pb.Command_AddAdminToken{
		AddAdminToken: &pb.AddAdminTokenCommand{TokenHash: h[:]},
	}}); err != nil {
		t.Fatalf("add admin token: %v", err)
	}

	call := func(token string) error {
		_, err := pb.NewKeyServiceClient(dial(t, env.addr, token)).ListKeys(ctx, &pb.ListKeysRequest{})
		return err
	}

	st := wantCode(t, call(""), codes.Unauthenticated)
	if !strings.Contains(st.Message(), "missing admin token") || !strings.Contains(st.Message(), "TOLLGATE_TOKEN") {
		t.Errorf("missing token message = %q", st.Message())
	}
	st = wantCode(t, call("wrong-token"), codes.Unauthenticated)
	if st.Message() != "invalid admin token" {
		t.Errorf("wrong token message = %q", st.Message())
	}
	if strings.Contains(st.Message(), "wrong-token") {
		t.Errorf("message echoes the token: %q", st.Message())
	}
	mustOK(t, call(testBootstrapToken))
	mustOK(t, call(registered))

	// Failures are logged, tokens never.
	logs := env.logs.String()
	if !strings.Contains(logs, "/tollgate.v1.KeyService/ListKeys") || !strings.Contains(logs, "Unauthenticated") {
		t.Errorf("auth failure not logged: %s", logs)
	}
	for _, tok := range []string{"wrong-token", testBootstrapToken, registered} {
		if strings.Contains(logs, tok) {
			t.Errorf("logs contain a token: %s", logs)
		}
	}

	// Every service is behind the interceptor.
	conn := dial(t, env.addr, "")
	_, err := pb.NewModelServiceClient(conn).ListModels(ctx, &pb.ListModelsRequest{})
	wantCode(t, err, codes.Unauthenticated)
	_, err = pb.NewCredentialServiceClient(conn).ListCredentials(ctx, &pb.ListCredentialsRequest{})
	wantCode(t, err, codes.Unauthenticated)
	_, err = pb.NewTeamServiceClient(conn).ListTeams(ctx, &pb.ListTeamsRequest{})
	wantCode(t, err, codes.Unauthenticated)
}

func TestAuthWithoutBootstrapToken(t *testing.T) {
	store := openStore(t)
	srv := New(Config{Store: store})
	ctx := ctxT(t)
	for _, md := range []string{"", "Bearer ", "Basic abc", "Bearer  "} {
		if _, err := srv.identify(incoming(ctx, md)); err == nil {
			t.Errorf("authorization %q accepted with no tokens configured", md)
		}
	}
	const tok = "tok"
	h := raftstore.HashSecret(tok)
	if _, err := store.Apply(ctx, &pb.Command{Op: &pb.Command_AddAdminToken{
		AddAdminToken: &pb.AddAdminTokenCommand{TokenHash: h[:]},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, md := range []string{"Bearer tok", "bearer tok", "  Bearer   tok  "} {
		if _, err := srv.identify(incoming(ctx, md)); err != nil {
			t.Errorf("authorization %q refused: %v", md, err)
		}
	}
}
