package admin

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

const (
	credValue      = "sk-live-credential-VALUE-QZXW"
	importedSecret = "tg-imported-secret-0123456789abcdefghij"
)

// writeStep is one admin write of the audit test: the RPC, the token it
// is made with, and its request (built from what earlier steps returned).
type writeStep struct {
	method string
	role   string
	req    func(got map[string]string) proto.Message
}

// writeSteps calls every write RPC this package serves at least once.
var writeSteps = []writeStep{
	{pb.TeamService_CreateTeam_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.CreateTeamRequest{Name: "blue"}
	}},
	{pb.TeamService_UpdateTeam_FullMethodName, raftstore.RoleOperator, func(g map[string]string) proto.Message {
		return &pb.UpdateTeamRequest{Id: g["team"], Name: proto.String("blue-2")}
	}},
	{pb.CredentialService_SetCredential_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.SetCredentialRequest{Name: "openai", Value: credValue}
	}},
	{pb.ModelService_AddDeployment_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.AddDeploymentRequest{Model: "gpt-x", Deployment: &pb.Deployment{Id: "d1", Provider: "openai", UpstreamModel: "gpt-4o", Credential: "openai"}}
	}},
	{pb.ModelService_UpdateDeployment_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.UpdateDeploymentRequest{Model: "gpt-x", DeploymentId: "d1", Weight: proto.Uint32(2)}
	}},
	{pb.ModelService_SetRouteOptions_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.SetRouteOptionsRequest{Model: "gpt-x", Options: &pb.RouteOptions{Strategy: "latency"}}
	}},
	{pb.ModelService_DeleteModel_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.DeleteModelRequest{Model: "gpt-x"}
	}},
	{pb.ModelService_AddDeployment_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.AddDeploymentRequest{Model: "gpt-y", Deployment: &pb.Deployment{Id: "d1", Provider: "demo", UpstreamModel: "demo"}}
	}},
	{pb.ModelService_RemoveDeployment_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.RemoveDeploymentRequest{Model: "gpt-y", DeploymentId: "d1"}
	}},
	{pb.CredentialService_DeleteCredential_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.DeleteCredentialRequest{Name: "openai"}
	}},
	{pb.KeyService_CreateKey_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.CreateKeyRequest{Name: "svc"}
	}},
	{pb.KeyService_UpdateKey_FullMethodName, raftstore.RoleOperator, func(g map[string]string) proto.Message {
		return &pb.UpdateKeyRequest{Id: g["key"], Name: proto.String("svc-2")}
	}},
	{pb.KeyService_RotateKey_FullMethodName, raftstore.RoleOperator, func(g map[string]string) proto.Message {
		return &pb.RotateKeyRequest{Id: g["key"]}
	}},
	{pb.KeyService_RevokeKey_FullMethodName, raftstore.RoleOperator, func(g map[string]string) proto.Message {
		return &pb.RevokeKeyRequest{Id: g["key"]}
	}},
	{pb.KeyService_ImportKeys_FullMethodName, raftstore.RoleOperator, func(map[string]string) proto.Message {
		return &pb.ImportKeysRequest{ImportId: "imp", Keys: []*pb.ImportedKey{{Name: "i1", Secret: importedSecret}, {Name: "i2"}}}
	}},
	{pb.TeamService_DeleteTeam_FullMethodName, raftstore.RoleOperator, func(g map[string]string) proto.Message {
		return &pb.DeleteTeamRequest{Id: g["team"]}
	}},
	{pb.UserService_CreateUser_FullMethodName, raftstore.RoleAdmin, func(map[string]string) proto.Message {
		return &pb.CreateUserRequest{Name: "new-viewer", Role: raftstore.RoleViewer}
	}},
	{pb.UserService_RotateUser_FullMethodName, raftstore.RoleAdmin, func(map[string]string) proto.Message {
		return &pb.RotateUserRequest{Name: "new-viewer"}
	}},
	{pb.UserService_RevokeUser_FullMethodName, raftstore.RoleAdmin, func(map[string]string) proto.Message {
		return &pb.RevokeUserRequest{Name: "new-viewer"}
	}},
	{pb.UserService_EndConsoleSession_FullMethodName, raftstore.RoleViewer, func(map[string]string) proto.Message {
		return &pb.EndConsoleSessionRequest{}
	}},
}

// consoleSteps are the writes made with a console session of the step's
// user (signed from 127.0.0.1), not with its token.
var consoleSteps = map[string]bool{pb.UserService_EndConsoleSession_FullMethodName: true}

// stepConn is the connection a write step is made on.
func stepConn(t *testing.T, e *rbacEnv, s writeStep) *grpc.ClientConn {
	t.Helper()
	if !consoleSteps[s.method] {
		return dial(t, e.addr, e.tokens[s.role])
	}
	return dialConsole(t, e, signed(t, testClusterSecret, &pb.ConsoleSession{User: s.role + "-user",
		Nonce: ConsoleTokenBinding(e.tokens[s.role]), Address: "127.0.0.1:1"}))
}

// secretsOf collects every secret a response carries, and remembers the
// ids later steps need.
func secretsOf(resp proto.Message, got map[string]string, secrets *[]string) {
	switch r := resp.(type) {
	case *pb.CreateTeamResponse:
		got["team"] = r.GetTeam().GetId()
	case *pb.CreateKeyResponse:
		got["key"] = r.GetKey().GetId()
		*secrets = append(*secrets, r.GetSecret())
	case *pb.RotateKeyResponse:
		*secrets = append(*secrets, r.GetSecret())
	case *pb.ImportKeysResponse:
		for _, k := range r.GetResults() {
			if k.GetSecret() != "" {
				*secrets = append(*secrets, k.GetSecret())
			}
		}
	case *pb.CreateUserResponse:
		*secrets = append(*secrets, r.GetToken())
	case *pb.RotateUserResponse:
		*secrets = append(*secrets, r.GetToken())
	}
}

// leaks returns the forms of a secret that must never show: itself and
// its SHA-256 as raw bytes, hex and base64.
func leaks(secret string) []string {
	h := raftstore.HashSecret(secret)
	return []string{secret, string(h[:]), hex.EncodeToString(h[:]), base64.StdEncoding.EncodeToString(h[:])}
}

func checkNoSecrets(t *testing.T, what string, m proto.Message, secrets []string) {
	t.Helper()
	raw, _ := proto.Marshal(m)
	js, _ := protojson.Marshal(m)
	for _, s := range secrets {
		for _, l := range leaks(s) {
			if strings.Contains(string(raw), l) || strings.Contains(string(js), l) {
				t.Errorf("%s holds a secret (or its hash) %.12q…", what, s)
			}
		}
	}
}

// TestAuditRecordForEveryWriteRPC makes every write RPC of the services
// this package serves (from the descriptors) and finds each in the audit
// log: who, from where, which RPC, at which index, and no secret.
func TestAuditRecordForEveryWriteRPC(t *testing.T) {
	e := startConsoleRBAC(t)
	ctx := ctxT(t)
	g := grpc.NewServer()
	New(Config{Store: e.store}).Register(g)
	covered := map[string]bool{}
	for _, s := range writeSteps {
		covered[s.method] = true
	}
	for m, md := range adminMethods(t) {
		if _, served := g.GetServiceInfo()[string(md.Parent().FullName())]; served && rules[m].write && !covered[m] {
			t.Errorf("write RPC %s has no step in writeSteps: add one", m)
		}
	}

	got := map[string]string{}
	secrets := []string{credValue, importedSecret}
	before := e.store.State().Index
	for _, s := range writeSteps {
		md := adminMethods(t)[s.method]
		resp := newMessage(t, md.Output())
		if err := stepConn(t, e, s).Invoke(ctx, s.method, s.req(got), resp); err != nil {
			t.Fatalf("%s: %v", s.method, err)
		}
		secretsOf(resp, got, &secrets)
	}
	for _, su := range e.store.State().Users() {
		secrets = append(secrets, string(su.GetTokenHash())) // raw hash bytes
	}

	audit, err := pb.NewAuditServiceClient(dial(t, e.addr, e.tokens[raftstore.RoleViewer])).ListAudit(ctx, &pb.ListAuditRequest{Limit: 1000})
	mustOK(t, err)
	recs := audit.GetRecords()
	var mine []*pb.AuditRecord
	for _, r := range recs {
		if r.GetIndex() > before {
			mine = append(mine, r)
		}
	}
	if len(mine) != len(writeSteps) {
		t.Fatalf("%d audit records for %d writes: %v", len(mine), len(writeSteps), mine)
	}
	for i, s := range writeSteps {
		r := mine[len(mine)-1-i] // newest first
		wantUser := s.role + "-user"
		if s.role == raftstore.RoleAdmin {
			wantUser = raftstore.BootstrapUser
		}
		if r.GetRpc() != s.method || r.GetUser() != wantUser || r.GetRole() != s.role ||
			!strings.HasPrefix(r.GetAddress(), "127.0.0.1:") || r.GetError() != "" || r.GetTime() == nil {
			t.Errorf("record of step %d (%s) = %v", i, s.method, r)
		}
	}
	checkNoSecrets(t, "the audit log", audit, secrets)
}

// TestViewerNeverSeesASecret calls every read RPC a viewer may call (from
// the descriptors) with a key, a credential and a user in the state, and
// finds no secret, credential value, token or hash in any answer.
func TestViewerNeverSeesASecret(t *testing.T) {
	e := startRBAC(t)
	examples, secrets := secretsFixture(t, e)
	viewerReadsNoSecret(t, e, dial(t, e.addr, e.tokens[raftstore.RoleViewer]), examples, secrets)
}

// secretsFixture stores a credential, a deployment using it and a key, and
// returns example requests about them and every secret in the state.
func secretsFixture(t *testing.T, e *rbacEnv) (map[string]proto.Message, []string) {
	t.Helper()
	ctx := ctxT(t)
	adm := dial(t, e.addr, testBootstrapToken)
	_, err := pb.NewCredentialServiceClient(adm).SetCredential(ctx, &pb.SetCredentialRequest{Name: "openai", Value: credValue})
	mustOK(t, err)
	_, err = pb.NewModelServiceClient(adm).AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "gpt-4o",
		Deployment: &pb.Deployment{Id: "d1", Provider: "openai", UpstreamModel: "gpt-4o", Credential: "openai"}})
	mustOK(t, err)
	key, err := pb.NewKeyServiceClient(adm).CreateKey(ctx, &pb.CreateKeyRequest{Name: "svc", TeamId: e.team})
	mustOK(t, err)
	secrets := []string{credValue, key.GetSecret(), credValue[len(credValue)-4:]}
	for _, tok := range e.tokens {
		secrets = append(secrets, tok)
	}
	examples := map[string]proto.Message{
		pb.KeyService_GetKey_FullMethodName:     &pb.GetKeyRequest{Id: key.GetKey().GetId()},
		pb.ModelService_GetModel_FullMethodName: &pb.GetModelRequest{Model: "gpt-4o"},
		pb.TeamService_GetTeam_FullMethodName:   &pb.GetTeamRequest{Id: e.team},
	}
	return examples, secrets
}

// viewerReadsNoSecret makes, as viewer, every read RPC a viewer may call
// and checks that no answer holds one of secrets.
func viewerReadsNoSecret(t *testing.T, e *rbacEnv, viewer *grpc.ClientConn, examples map[string]proto.Message, secrets []string) {
	t.Helper()
	ctx := ctxT(t)
	_, _, served := serveAll(t, e.store)
	calls := 0
	for m, md := range adminMethods(t) {
		if _, ok := served[string(md.Parent().FullName())]; !ok || rules[m].write || !allows(raftstore.RoleViewer, rules[m].perm) {
			continue
		}
		req := examples[m]
		if req == nil {
			req = newMessage(t, md.Input())
		}
		resp := newMessage(t, md.Output())
		if err := viewer.Invoke(ctx, m, req, resp); err != nil {
			if status.Code(err) == codes.Unimplemented { // a stub of this test
				continue
			}
			t.Fatalf("viewer calling %s: %v", m, err)
		}
		calls++
		checkNoSecrets(t, m, resp, secrets)
	}
	if calls < 8 {
		t.Errorf("only %d read RPCs answered the viewer", calls)
	}
}
