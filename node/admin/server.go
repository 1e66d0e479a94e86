// Package admin implements Tollgate's admin gRPC API (KeyService,
// ModelService, CredentialService, TeamService, UserService and
// AuditService) on top of the Raft store: reads come from the published
// raftstore.State, writes become typed Raft commands. Its interceptors
// authenticate every call and check it against the caller's role
// (roles.go) before anything else runs.
package admin

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// Store is what the admin API needs of the Raft store.
type Store interface {
	// State returns the current published state; it never blocks.
	State() *raftstore.State
	// Apply proposes cmd and returns its result once applied.
	Apply(ctx context.Context, cmd *pb.Command) (proto.Message, error)
}

var _ Store = (*raftstore.Store)(nil)

// Config configures a Server.
type Config struct {
	Store Store
	// BootstrapToken is accepted in addition to the tokens registered in the
	// replicated state (raftstore State.HasAdminToken), so the first call works
	// before the token's hash has been applied. May be empty.
	BootstrapToken string
	// Logger receives failed calls; nil means slog.Default().
	Logger *slog.Logger
	// Prices returns the price that applies to a deployment of provider
	// kind kind with API root baseURL serving upstream model model, given
	// the deployment's own price override (nil for none), and where that
	// price comes from ("override", "built-in PROVIDER/MODEL", ...). A nil
	// price means unknown. ModelService.ListPrices shows it; when Prices
	// is nil, every price is reported unknown.
	Prices func(kind, baseURL, model string, override *pb.Price) (price *pb.Price, source string)
	// TestModel sends a test request through the data plane of this node
	// (ModelService.TestModel); nil answers Unimplemented.
	TestModel func(ctx context.Context, req *pb.TestModelRequest) (*pb.TestModelResponse, error)
	// Health reports this node's live view of a route's deployments (of
	// every route for ""); ListModels and GetModel show it. Nil: none.
	Health func(route string) []*pb.DeploymentHealth
	// NodeID names the node in what Health reports.
	NodeID string
	// MaxEndedConsoleSessions bounds the ended console sessions a logout
	// may take the cluster to; 0: raftstore.MaxEndedConsoleSessions.
	MaxEndedConsoleSessions int
}

// Server serves the admin API. Register it on a grpc.Server together with
// its interceptors, which enforce the admin bearer token.
type Server struct {
	store     Store
	bootstrap [32]byte
	hasBoot   bool
	log       *slog.Logger
	prices    func(kind, baseURL, model string, override *pb.Price) (*pb.Price, string)
	testModel func(ctx context.Context, req *pb.TestModelRequest) (*pb.TestModelResponse, error)
	health    func(route string) []*pb.DeploymentHealth
	nodeID    string
	now       func() time.Time
	keyTotals keyTotals     // ListKeys totals of the current State
	maxEnded  int           // see Config.MaxEndedConsoleSessions
	endSlot   chan struct{} // one logout at a time checks the bound and applies
}

// New returns a Server. cfg.Store must not be nil.
func New(cfg Config) *Server {
	if cfg.Store == nil {
		panic("admin: Config.Store is nil")
	}
	s := &Server{store: cfg.Store, log: cfg.Logger, prices: cfg.Prices, testModel: cfg.TestModel, now: time.Now,
		health: cfg.Health, nodeID: cfg.NodeID, maxEnded: cmp.Or(cfg.MaxEndedConsoleSessions, raftstore.MaxEndedConsoleSessions),
		endSlot: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if cfg.BootstrapToken != "" {
		s.bootstrap, s.hasBoot = raftstore.HashSecret(cfg.BootstrapToken), true
	}
	return s
}

// Register registers KeyService, ModelService, CredentialService,
// TeamService, UserService and AuditService on g.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	pb.RegisterKeyServiceServer(g, keyService{s: s})
	pb.RegisterModelServiceServer(g, modelService{s: s})
	pb.RegisterCredentialServiceServer(g, credentialService{s: s})
	pb.RegisterTeamServiceServer(g, teamService{s: s})
	pb.RegisterUserServiceServer(g, userService{s: s})
	pb.RegisterAuditServiceServer(g, auditService{s: s})
}

// The services share the Server; each needs its own type because the
// generated Unimplemented* structs cannot be embedded side by side.
type (
	keyService struct {
		pb.UnimplementedKeyServiceServer
		s *Server
	}
	modelService struct {
		pb.UnimplementedModelServiceServer
		s *Server
	}
	credentialService struct {
		pb.UnimplementedCredentialServiceServer
		s *Server
	}
	teamService struct {
		pb.UnimplementedTeamServiceServer
		s *Server
	}
)

// apply stamps cmd with the proposer's time, the call's request id and
// its caller (for the audit log), applies it and maps failures to gRPC
// statuses.
func (s *Server) apply(ctx context.Context, cmd *pb.Command) (proto.Message, error) {
	rid, err := RequestID(ctx)
	if err != nil {
		return nil, err
	}
	cmd.RequestId = rid
	cmd.UnixNanos = s.now().UnixNano()
	cmd.Actor = ActorOf(ctx)
	res, err := s.store.Apply(ctx, cmd)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return res, nil
}

// applyAs applies cmd and checks that its result is a T (or nil, when
// allowNil).
func applyAs[T proto.Message](ctx context.Context, s *Server, cmd *pb.Command, allowNil bool) (T, error) {
	var zero T
	res, err := s.apply(ctx, cmd)
	if err != nil {
		return zero, err
	}
	if res == nil && allowNil {
		return zero, nil
	}
	v, ok := res.(T)
	if !ok {
		s.log.ErrorContext(ctx, "admin: unexpected apply result",
			"want", fmt.Sprintf("%T", zero), "got", fmt.Sprintf("%T", res))
		return zero, status.Error(codes.Internal, "internal error: unexpected result from the store")
	}
	return v, nil
}
