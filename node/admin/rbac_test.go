package admin

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// adminMethods lists every RPC of every service of the tollgate.v1
// package, from the generated file descriptors, with its request type.
func adminMethods(t *testing.T) map[string]protoreflect.MethodDescriptor {
	t.Helper()
	out := map[string]protoreflect.MethodDescriptor{}
	protoregistry.GlobalFiles.RangeFilesByPackage("tollgate.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				out["/"+string(sd.FullName())+"/"+string(md.Name())] = md
			}
		}
		return true
	})
	if len(out) < 40 {
		t.Fatalf("found %d admin RPCs in the descriptors; is the package name right?", len(out))
	}
	return out
}

func TestEveryRPCHasAnAccessRule(t *testing.T) {
	methods := adminMethods(t)
	for m := range methods {
		if _, ok := rules[m]; !ok {
			t.Errorf("%s has no access rule: add one to rules in roles.go", m)
		}
	}
	for m := range rules {
		if _, ok := methods[m]; !ok {
			t.Errorf("rules names %s, which no service has", m)
		}
	}
}

// The roles' boundaries, stated apart from the table that implements them.
func TestRoleBoundaries(t *testing.T) {
	for m, r := range rules {
		p := string(r.perm)
		area, _, _ := strings.Cut(p, ".")
		if !allows(raftstore.RoleAdmin, r.perm) {
			t.Errorf("admin may not call %s", m)
		}
		if got, want := allows(raftstore.RoleViewer, r.perm),
			r.perm == permAuthenticated || !r.write && area != "users" && r.perm != PermClusterBackup && r.perm != PermClusterInternal && r.perm != PermModelsTest && r.perm != PermMcpTest; got != want {
			t.Errorf("viewer may call %s (%s): %v, want %v", m, p, got, want)
		}
		if got, want := allows(raftstore.RoleOperator, r.perm),
			area != "users" && r.perm != PermClusterWrite && r.perm != PermClusterBackup && r.perm != PermClusterInternal; got != want {
			t.Errorf("operator may call %s (%s): %v, want %v", m, p, got, want)
		}
		if got, want := allows(raftstore.RoleTeamAdmin, r.perm),
			(area == "keys" || r.perm == PermTeamsRead || r.perm == PermModelsRead || r.perm == PermSpendRead || r.perm == permAuthenticated); got != want {
			t.Errorf("team-admin may call %s (%s): %v, want %v", m, p, got, want)
		}
	}
}

// rbacEnv is a server with every admin service registered (the cluster
// and spend services as stubs, as node registers the real ones) and a
// user of every role.
type rbacEnv struct {
	*testEnv
	store  *raftstore.Store
	tokens map[string]string // role → token
	team   string
}

type stubCluster struct {
	pb.UnimplementedClusterServiceServer
}
type stubSpend struct {
	pb.UnimplementedSpendServiceServer
}

func startRBAC(t *testing.T) *rbacEnv {
	t.Helper()
	store := openStore(t)
	env := startServerWith(t, Config{Store: store}, nil)
	ctx := ctxT(t)
	team, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "red", Budget: &pb.Budget{LimitNanos: 1000, Period: "month"}})
	mustOK(t, err)
	e := &rbacEnv{testEnv: env, store: store, tokens: map[string]string{raftstore.RoleAdmin: testBootstrapToken}, team: team.GetTeam().GetId()}
	users := pb.NewUserServiceClient(dial(t, env.addr, testBootstrapToken))
	for _, role := range []string{raftstore.RoleOperator, raftstore.RoleViewer, raftstore.RoleTeamAdmin} {
		req := &pb.CreateUserRequest{Name: role + "-user", Role: role}
		if role == raftstore.RoleTeamAdmin {
			req.TeamId, req.Models = e.team, []string{"gpt-*"}
		}
		resp, err := users.CreateUser(ctx, req)
		mustOK(t, err)
		if !strings.HasPrefix(resp.GetToken(), userTokenPrefix) || resp.GetUser().GetRole() != role {
			t.Fatalf("CreateUser = %v", resp)
		}
		e.tokens[role] = resp.GetToken()
	}
	return e
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// serveAll serves the admin API with the cluster and spend services as
// stubs (node registers the real ones), so that every RPC reaches the
// interceptor; it returns the server's address, the Server and which
// services it serves.
func serveAll(t *testing.T, store Store) (string, *Server, map[string]grpc.ServiceInfo) {
	t.Helper()
	srv := New(Config{Store: store, BootstrapToken: testBootstrapToken, Logger: discardLogger()})
	g := grpc.NewServer(grpc.UnaryInterceptor(srv.UnaryInterceptor()))
	srv.Register(g)
	pb.RegisterClusterServiceServer(g, stubCluster{})
	pb.RegisterSpendServiceServer(g, stubSpend{})
	return serve(t, g), srv, g.GetServiceInfo()
}

// TestEveryRoleAgainstEveryRPC calls every RPC of the descriptors with
// every role: the call is refused with PermissionDenied naming the missing
// permission exactly when the role lacks it. Calls go over gRPC; an RPC of
// a service this package's test does not serve goes through the
// interceptor directly.
func TestEveryRoleAgainstEveryRPC(t *testing.T) {
	e := startRBAC(t)
	addr, srv, served := serveAll(t, e.store)
	ctx := ctxT(t)
	for role, token := range e.tokens {
		conn := dial(t, addr, token)
		for m, md := range adminMethods(t) {
			req := newMessage(t, md.Input())
			var err error
			if _, ok := served[string(md.Parent().FullName())]; ok {
				err = conn.Invoke(ctx, m, req, newMessage(t, md.Output()))
			} else {
				_, err = srv.UnaryInterceptor()(incoming(ctx, "Bearer "+token), req, &grpc.UnaryServerInfo{FullMethod: m},
					func(context.Context, any) (any, error) { return nil, nil })
			}
			denied := status.Code(err) == codes.PermissionDenied && strings.Contains(status.Convert(err).Message(), "needs the permission")
			if want := !allows(role, rules[m].perm); denied != want {
				t.Errorf("%s calling %s: err = %v, want refused for lacking a permission: %v", role, m, err, want)
			}
			if denied && !strings.Contains(status.Convert(err).Message(), string(rules[m].perm)) {
				t.Errorf("%s calling %s: %v does not name the permission %s", role, m, err, rules[m].perm)
			}
		}
	}
}

func newMessage(t *testing.T, md protoreflect.MessageDescriptor) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}

func TestWhoAmINamesEachCaller(t *testing.T) {
	e := startRBAC(t)
	ctx := ctxT(t)
	for role, token := range e.tokens {
		got, err := pb.NewUserServiceClient(dial(t, e.addr, token)).WhoAmI(ctx, &pb.WhoAmIRequest{})
		mustOK(t, err)
		wantUser := role + "-user"
		if role == raftstore.RoleAdmin {
			wantUser = raftstore.BootstrapUser
		}
		if got.GetUser() != wantUser || got.GetRole() != role {
			t.Errorf("WhoAmI with the %s token = %v", role, got)
		}
	}
}

func TestRevokedAndRotatedUserTokens(t *testing.T) {
	e := startRBAC(t)
	ctx := ctxT(t)
	admin := pb.NewUserServiceClient(dial(t, e.addr, testBootstrapToken))
	old := e.tokens[raftstore.RoleOperator]
	rot, err := admin.RotateUser(ctx, &pb.RotateUserRequest{Name: "operator-user"})
	mustOK(t, err)
	_, err = pb.NewKeyServiceClient(dial(t, e.addr, old)).ListKeys(ctx, &pb.ListKeysRequest{})
	wantCode(t, err, codes.Unauthenticated)
	_, err = pb.NewKeyServiceClient(dial(t, e.addr, rot.GetToken())).ListKeys(ctx, &pb.ListKeysRequest{})
	mustOK(t, err)
	_, err = admin.RevokeUser(ctx, &pb.RevokeUserRequest{Name: "operator-user"})
	mustOK(t, err)
	_, err = pb.NewKeyServiceClient(dial(t, e.addr, rot.GetToken())).ListKeys(ctx, &pb.ListKeysRequest{})
	wantCode(t, err, codes.Unauthenticated)
	// Listed as revoked, never with a token or its hash.
	got, err := admin.GetUser(ctx, &pb.GetUserRequest{Name: "operator-user"})
	mustOK(t, err)
	if got.GetUser().GetRevokedAt() == nil || got.GetUser().GetCreatedBy() != raftstore.BootstrapUser {
		t.Errorf("GetUser = %v, want revoked, created by bootstrap", got)
	}
	// Only an admin manages users.
	_, err = pb.NewUserServiceClient(dial(t, e.addr, e.tokens[raftstore.RoleTeamAdmin])).ListUsers(ctx, &pb.ListUsersRequest{})
	wantCode(t, err, codes.PermissionDenied)
	_, err = pb.NewUserServiceClient(dial(t, e.addr, e.tokens[raftstore.RoleViewer])).CreateUser(ctx, &pb.CreateUserRequest{Name: "x", Role: "admin"})
	st := wantCode(t, err, codes.PermissionDenied)
	if !strings.Contains(st.Message(), "users.write") {
		t.Errorf("refusal %q does not name users.write", st.Message())
	}
}

// withMD adds metadata pairs to an outgoing context.
func withMD(ctx context.Context, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// The nodes' internal RPCs are for nodes and the bootstrap token: an
// admin user may not propose raw commands (an unaudited admin token).
func TestAdminUsersMayNotCallTheNodesInternalRPCs(t *testing.T) {
	e := startRBAC(t)
	ctx := ctxT(t)
	root, err := pb.NewUserServiceClient(dial(t, e.addr, testBootstrapToken)).CreateUser(ctx, &pb.CreateUserRequest{Name: "root", Role: raftstore.RoleAdmin})
	mustOK(t, err)
	addr, _, _ := serveAll(t, e.store)
	for token, want := range map[string]codes.Code{root.GetToken(): codes.PermissionDenied, testBootstrapToken: codes.Unimplemented} {
		_, err := pb.NewClusterServiceClient(dial(t, addr, token)).Propose(ctx, &pb.ProposeRequest{})
		wantCode(t, err, want) // the stub answers Unimplemented once past the check
	}
}
