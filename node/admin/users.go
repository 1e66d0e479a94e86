package admin

import (
	"context"
	"encoding/base64"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// userTokenPrefix starts every user token, so that one is told from a
// key secret at a glance.
const userTokenPrefix = "tgu-"

type userService struct {
	pb.UnimplementedUserServiceServer
	s *Server
}

type auditService struct {
	pb.UnimplementedAuditServiceServer
	s *Server
}

// tokenFromSeed returns a user token made of seed (fresh random bytes
// when empty), its SHA-256 and its display prefix.
func tokenFromSeed(seed []byte) (token string, hash []byte, prefix string, err error) {
	switch len(seed) {
	case 0:
		seed = NewSecretSeed()
	case SecretSeedLen:
	default:
		return "", nil, "", invalid("token_seed must be %d random bytes (or empty), not %d", SecretSeedLen, len(seed))
	}
	token = userTokenPrefix + base64.RawURLEncoding.EncodeToString(seed)
	h := raftstore.HashSecret(token)
	return token, h[:], token[:secretPrefixLen], nil
}

// publicUser returns the user as the API shows it: without the hash.
func publicUser(su *pb.StoredUser) *pb.User {
	if su.GetUser() == nil {
		return nil
	}
	return proto.Clone(su.GetUser()).(*pb.User)
}

func (u userService) CreateUser(ctx context.Context, req *pb.CreateUserRequest) (*pb.CreateUserResponse, error) {
	user := &pb.User{Name: req.GetName(), Role: req.GetRole(), TeamId: req.GetTeamId(),
		Models: append([]string(nil), req.GetModels()...)}
	if err := raftstore.ValidateUserName(user.GetName()); err != nil {
		return nil, u.s.toStatus(ctx, err)
	}
	if err := raftstore.ValidateUserRole(u.s.store.State(), user); err != nil {
		return nil, u.s.toStatus(ctx, err)
	}
	if err := checkModelPatterns(user.GetModels()); err != nil {
		return nil, err
	}
	token, hash, prefix, err := tokenFromSeed(req.GetTokenSeed())
	if err != nil {
		return nil, err
	}
	user.TokenPrefix = prefix
	if id := IdentityFrom(ctx); id != nil {
		user.CreatedBy = id.User
	}
	cmd := &pb.Command{Op: &pb.Command_CreateUser{CreateUser: &pb.CreateUserCommand{
		User: &pb.StoredUser{User: user, TokenHash: hash}}}}
	su, err := applyAs[*pb.StoredUser](ctx, u.s, cmd, false)
	if err != nil {
		return nil, err
	}
	if string(su.GetTokenHash()) != string(hash) {
		// The state machine answered an earlier request with this id.
		return nil, status.Errorf(codes.AlreadyExists, "this request id was used already, to create user %s; send a new id for a new request", su.GetUser().GetName())
	}
	return &pb.CreateUserResponse{User: publicUser(su), Token: token}, nil
}

func (u userService) ListUsers(_ context.Context, req *pb.ListUsersRequest) (*pb.ListUsersResponse, error) {
	var out []*pb.User
	for _, su := range u.s.store.State().Users() {
		if su.GetUser().GetRevokedAt() != nil && !req.GetIncludeRevoked() {
			continue
		}
		out = append(out, publicUser(su))
	}
	return &pb.ListUsersResponse{Users: out}, nil
}

func (u userService) GetUser(_ context.Context, req *pb.GetUserRequest) (*pb.GetUserResponse, error) {
	su := u.s.store.State().User(req.GetName())
	if su == nil {
		return nil, status.Errorf(codes.NotFound, "user %q not found", req.GetName())
	}
	return &pb.GetUserResponse{User: publicUser(su)}, nil
}

func (u userService) RevokeUser(ctx context.Context, req *pb.RevokeUserRequest) (*pb.RevokeUserResponse, error) {
	if req.GetName() == "" {
		return nil, invalid("user name is required")
	}
	cmd := &pb.Command{Op: &pb.Command_RevokeUser{RevokeUser: &pb.RevokeUserCommand{Name: req.GetName()}}}
	su, err := applyAs[*pb.StoredUser](ctx, u.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.RevokeUserResponse{User: publicUser(su)}, nil
}

func (u userService) RotateUser(ctx context.Context, req *pb.RotateUserRequest) (*pb.RotateUserResponse, error) {
	if req.GetName() == "" {
		return nil, invalid("user name is required")
	}
	token, hash, prefix, err := tokenFromSeed(req.GetTokenSeed())
	if err != nil {
		return nil, err
	}
	cmd := &pb.Command{Op: &pb.Command_RotateUser{RotateUser: &pb.RotateUserCommand{
		Name: req.GetName(), TokenHash: hash, TokenPrefix: prefix}}}
	su, err := applyAs[*pb.StoredUser](ctx, u.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.RotateUserResponse{User: publicUser(su), Token: token}, nil
}

func (u userService) WhoAmI(ctx context.Context, _ *pb.WhoAmIRequest) (*pb.WhoAmIResponse, error) {
	id := IdentityFrom(ctx)
	if id == nil {
		return nil, status.Error(codes.Unauthenticated, msgMissingToken)
	}
	return &pb.WhoAmIResponse{User: id.User, Role: id.Role, TeamId: id.TeamID, Permissions: permissionsOf(id.Role)}, nil
}

// maxAuditRecords bounds one ListAudit answer.
const maxAuditRecords = 10_000

func (a auditService) ListAudit(_ context.Context, req *pb.ListAuditRequest) (*pb.ListAuditResponse, error) {
	limit := int(req.GetLimit())
	switch {
	case limit == 0:
		limit = 100
	case limit > maxAuditRecords:
		return nil, invalid("limit %d: at most %d", limit, maxAuditRecords)
	}
	if req.GetSince() < 0 || req.GetUntil() < 0 || (req.GetUntil() != 0 && req.GetUntil() < req.GetSince()) {
		return nil, invalid("since and until are Unix seconds, since before until")
	}
	recs := a.s.store.State().AuditRecords(raftstore.AuditFilter{
		User: req.GetUser(), Since: req.GetSince(), Until: req.GetUntil(), Limit: limit})
	out := make([]*pb.AuditRecord, len(recs))
	for i, r := range recs {
		out[i] = proto.Clone(r).(*pb.AuditRecord)
	}
	return &pb.ListAuditResponse{Records: out}, nil
}
