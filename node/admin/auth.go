package admin

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

const (
	msgMissingToken = "missing admin token: pass --token or set TOLLGATE_TOKEN"
	msgInvalidToken = "invalid admin token"
)

// A write one node forwards to the leader carries the caller's own token,
// which the leader authenticates and authorizes again, and in
// MetadataActor the caller as the receiving node saw it (a marshalled
// pb.Actor: above all the client's address, which the leader cannot see),
// with MetadataActorMAC, an HMAC-SHA256 of it under the cluster secret.
// The leader takes the address from it only when the MAC is good and the
// actor is the user the token belongs to; otherwise (a client forging it,
// a leader that cannot open the cluster secret) it is ignored.
const (
	MetadataActor    = "x-tollgate-actor-bin"
	MetadataActorMAC = "x-tollgate-actor-mac"
)

// nodeUser is the identity of a node calling another with the cluster
// secret for its own purposes (spend reports, leases, status).
const nodeUser = raftstore.NodeUser

// Identity is who a call comes from.
type Identity struct {
	// User is the user's name, raftstore.BootstrapUser for an admin
	// token, or "node" for another node.
	User string
	Role string
	// TeamID and Models scope a team-admin.
	TeamID string
	Models []string
	// Address is the client's address as the node that received the call
	// saw it.
	Address string
	// internal is set for the cluster secret and the admin tokens, which
	// may call the nodes' internal RPCs; never for a user, whatever its
	// name.
	internal bool
	// console is the web console session the call was made with, if any.
	console *consoleSession
}

type identityKey struct{}

// IdentityFrom returns the caller the interceptors authenticated, or nil.
func IdentityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

// ActorOf returns the actor to stamp on a command proposed for the call
// of ctx (nil outside an authenticated admin call).
func ActorOf(ctx context.Context) *pb.Actor {
	id := IdentityFrom(ctx)
	if id == nil {
		return nil
	}
	method, _ := grpc.Method(ctx)
	return &pb.Actor{User: id.User, Role: id.Role, Address: id.Address, Rpc: method}
}

// ForwardMetadata returns the actor metadata a node adds to a write it
// forwards to the leader (see MetadataActor); none when this node knows
// no cluster secret or the call has no identity.
func ForwardMetadata(ctx context.Context, clusterSecret string) metadata.MD {
	a := ActorOf(ctx)
	if a == nil {
		return nil
	}
	a.Rpc = "" // the leader sees the method itself
	return ActorMetadata(clusterSecret, a)
}

// ActorMetadata is how a holder of the cluster secret (a node forwarding
// a write, or its web console) vouches for the address a's user calls
// from (see MetadataActor); none without a cluster secret.
func ActorMetadata(clusterSecret string, a *pb.Actor) metadata.MD {
	if clusterSecret == "" {
		return nil
	}
	b, err := proto.Marshal(a)
	if err != nil {
		return nil
	}
	return metadata.Pairs(MetadataActor, string(b), MetadataActorMAC, actorMAC(clusterSecret, b))
}

func actorMAC(clusterSecret string, actor []byte) string {
	m := hmac.New(sha256.New, []byte("tollgate forwarded actor\x00"+clusterSecret))
	m.Write(actor)
	return hex.EncodeToString(m.Sum(nil))
}

// forwardedAddress returns the client address a forwarding node vouched
// for, if the call's metadata carries a good MAC for id's user; else "".
func forwardedAddress(ctx context.Context, st *raftstore.State, id *Identity) string {
	return vouchedActor(ctx, st, id).GetAddress()
}

// vouchedActor returns the actor a node signed with the cluster secret in
// the call's metadata (see ForwardMetadata) when the MAC is good and it is
// id's user; else nil. (Metadata is read value by value: FromIncomingContext
// would copy every header of every call.)
func vouchedActor(ctx context.Context, st *raftstore.State, id *Identity) *pb.Actor {
	a := metadata.ValueFromIncomingContext(ctx, MetadataActor)
	mac := metadata.ValueFromIncomingContext(ctx, MetadataActorMAC)
	if len(a) == 0 || len(mac) == 0 || st == nil || id == nil {
		return nil
	}
	cs := st.ClusterSecret()
	if cs == "" || !hmac.Equal([]byte(mac[0]), []byte(actorMAC(cs, []byte(a[0])))) {
		return nil
	}
	var actor pb.Actor
	if proto.Unmarshal([]byte(a[0]), &actor) != nil || actor.GetUser() != id.User {
		return nil
	}
	return &actor
}

// UnaryInterceptor authenticates every call, checks that the caller's
// role allows the RPC (and, for a team-admin, that the call stays within
// its team) before anything else runs — forwarding to the leader
// included — and logs failed calls (never the token).
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		id, err := s.authorize(ctx, info.FullMethod)
		if err == nil {
			req, err = s.scopeRequest(id, req)
		}
		if err != nil {
			s.logFailure(ctx, info.FullMethod, err)
			return nil, err
		}
		resp, err := handler(context.WithValue(ctx, identityKey{}, id), req)
		if err != nil {
			s.logFailure(ctx, info.FullMethod, err)
			return resp, err
		}
		return filterResponse(id, resp), nil
	}
}

// StreamInterceptor authenticates and authorizes every stream, like
// UnaryInterceptor.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		id, err := s.authorize(ctx, info.FullMethod)
		if err != nil {
			s.logFailure(ctx, info.FullMethod, err)
			return err
		}
		err = handler(srv, identifiedStream{ss, context.WithValue(ctx, identityKey{}, id)})
		if err != nil {
			s.logFailure(ctx, info.FullMethod, err)
		}
		return err
	}
}

// identifiedStream is a stream whose context carries the caller.
type identifiedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s identifiedStream) Context() context.Context { return s.ctx }

// authorize authenticates the call and checks the caller's role against
// the RPC's rule; a refusal is PermissionDenied naming the permission.
func (s *Server) authorize(ctx context.Context, method string) (*Identity, error) {
	id, err := s.identify(ctx)
	if err != nil {
		return nil, err
	}
	r, ok := rules[method]
	if !ok {
		return nil, status.Errorf(codes.PermissionDenied, "permission denied: %s has no access rule, so nobody may call it", method)
	}
	if !allows(id.Role, r.perm) {
		return nil, status.Errorf(codes.PermissionDenied, "permission denied: %s needs the permission %s, which the role %s (user %s) lacks",
			method, r.perm, id.Role, id.User)
	}
	if r.perm == PermClusterInternal && !id.internal {
		// Nodes' own plumbing (it can register an admin token, unaudited):
		// not for users, admins included.
		return nil, status.Errorf(codes.PermissionDenied, "permission denied: %s is for the nodes themselves (and the bootstrap token), not user %s",
			method, id.User)
	}
	return id, nil
}

// identify authenticates the call (see token) and, for a write another
// node forwarded, takes the client's address from the actor it vouched
// for.
func (s *Server) identify(ctx context.Context) (*Identity, error) {
	id, err := s.token(ctx)
	if err != nil {
		return nil, err
	}
	if addr := forwardedAddress(ctx, s.store.State(), id); addr != "" {
		id.Address = addr
	}
	return id, nil
}

// token accepts "authorization: Bearer <token>" when the token is the
// bootstrap token or an admin token registered in the replicated state
// (user "bootstrap", role admin), an active user's token, or the cluster
// secret (another node, for its own calls); and "authorization: Console
// <session>" from the web console (consoleToken).
func (s *Server) token(ctx context.Context) (*Identity, error) {
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
		return nil, status.Error(codes.Unauthenticated, msgMissingToken)
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	token = strings.TrimSpace(token)
	if ok && token != "" && scheme == ConsoleScheme {
		method, _ := grpc.Method(ctx)
		return s.consoleToken(token, method == pb.UserService_EndConsoleSession_FullMethodName)
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, status.Error(codes.Unauthenticated, msgInvalidToken+`: the authorization metadata must be "Bearer <token>"`)
	}
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	h := raftstore.HashSecret(token)
	// Comparing hashes keeps the comparison constant-time in the token's
	// length too.
	if s.hasBoot && subtle.ConstantTimeCompare(h[:], s.bootstrap[:]) == 1 {
		return bootstrapIdentity(addr), nil
	}
	st := s.store.State()
	if st == nil {
		return nil, status.Error(codes.Unauthenticated, msgInvalidToken)
	}
	if st.HasAdminToken(h) {
		return bootstrapIdentity(addr), nil
	}
	if su := st.UserByToken(h); su != nil {
		return userIdentity(su.GetUser(), addr), nil
	}
	// Nodes call each other with the replicated cluster secret.
	if cs := st.ClusterSecret(); cs != "" {
		ch := raftstore.HashSecret(cs)
		if subtle.ConstantTimeCompare(h[:], ch[:]) == 1 {
			return &Identity{User: nodeUser, Role: raftstore.RoleAdmin, Address: addr, internal: true}, nil
		}
	}
	return nil, status.Error(codes.Unauthenticated, msgInvalidToken)
}

// consoleToken authenticates a web console session (see
// ConsoleSession): its MAC under the cluster secret, its expiry, that it
// was not logged out, and the user it names as the replicated state has
// it now. A session logged out already opens for logging out only
// (idempotent: see EndConsoleSession).
func (s *Server) consoleToken(signed string, loggingOut bool) (*Identity, error) {
	st := s.store.State()
	if st == nil {
		return nil, status.Error(codes.Unauthenticated, msgInvalidToken)
	}
	cs, mac, err := openConsoleSession(st.ClusterSecret(), signed, s.now())
	ended := err == nil && st.EndedConsoleSessions() > 0 && st.ConsoleSessionEnded(sessionID(mac), cs.GetExpiresAt())
	if ended && !loggingOut {
		err = ErrSessionEnded
	}
	if err == nil {
		var id *Identity
		if id, err = consoleIdentity(st, cs); err == nil {
			id.console = &consoleSession{mac: mac, expires: cs.GetExpiresAt(), ended: ended}
			return id, nil
		}
	}
	if errors.Is(err, ErrNoClusterKey) {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return nil, status.Error(codes.Unauthenticated, "invalid console session: "+err.Error())
}

func bootstrapIdentity(addr string) *Identity {
	return &Identity{User: raftstore.BootstrapUser, Role: raftstore.RoleAdmin, Address: addr, internal: true}
}

func userIdentity(u *pb.User, addr string) *Identity {
	return &Identity{User: u.GetName(), Role: u.GetRole(), TeamID: u.GetTeamId(), Models: u.GetModels(), Address: addr}
}

// logFailure logs a failed call: server-side failures as errors or
// warnings, rejected tokens and refused permissions as warnings, caller
// mistakes as info.
func (s *Server) logFailure(ctx context.Context, method string, err error) {
	st := status.Convert(err)
	level := slog.LevelInfo
	switch st.Code() {
	case codes.Internal, codes.Unknown, codes.DataLoss:
		level = slog.LevelError
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unavailable:
		level = slog.LevelWarn
	}
	attrs := []any{"method", method, "code", st.Code().String(), "error", st.Message()}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		attrs = append(attrs, "peer", p.Addr.String())
	}
	s.log.Log(ctx, level, "admin call failed", attrs...)
}
