package admin

import (
	"context"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// McpProbe is what the MCP admin calls need of this node's MCP gateway.
type McpProbe interface {
	// Status returns how this node sees a configured server; nil when it
	// does not know it (yet).
	Status(name string) *pb.McpServerStatus
	// Test connects to the server afresh and lists its tools.
	Test(ctx context.Context, cfg *pb.McpServer) *pb.TestMcpServerResponse
}

type mcpService struct {
	pb.UnimplementedMcpServiceServer
	s     *Server
	probe McpProbe
}

// RegisterMcp registers McpService on g; probe answers for this node's
// gateway.
func (s *Server) RegisterMcp(g grpc.ServiceRegistrar, probe McpProbe) {
	pb.RegisterMcpServiceServer(g, mcpService{s: s, probe: probe})
}

// publicMcpServer returns what the API shows of a server: header and
// environment names, never their values.
func publicMcpServer(m *pb.McpServer) *pb.McpServerInfo {
	if m == nil {
		return nil
	}
	info := &pb.McpServerInfo{Name: m.GetName(), Transport: m.GetTransport(), Url: m.GetUrl(), Command: m.GetCommand(),
		Credential: m.GetCredential(), TimeoutMs: m.GetTimeoutMs(), PricePerCallNanos: m.GetPricePerCallNanos(),
		CreatedAt: m.GetCreatedAt(), UpdatedAt: m.GetUpdatedAt()}
	for h := range m.GetHeaders() {
		info.HeaderNames = append(info.HeaderNames, h)
	}
	for e := range m.GetEnv() {
		info.EnvNames = append(info.EnvNames, e)
	}
	sort.Strings(info.HeaderNames)
	sort.Strings(info.EnvNames)
	return info
}

func (m mcpService) AddMcpServer(ctx context.Context, req *pb.AddMcpServerRequest) (*pb.AddMcpServerResponse, error) {
	srv := req.GetServer()
	if srv == nil {
		return nil, invalid("server is required")
	}
	if err := raftstore.ValidateMcpServer(srv); err != nil {
		return nil, invalid("%s", strings.TrimSuffix(err.Error(), ": "+raftstore.ErrInvalid.Error()))
	}
	srv = proto.Clone(srv).(*pb.McpServer)
	st := m.s.store.State()
	forwarded := forwardedByNode(ctx, st)
	for kind, vals := range map[string]map[string]string{"header": srv.GetHeaders(), "env": srv.GetEnv()} {
		for k, v := range vals {
			sealed, err := sealMcpValue(st, srv.GetName(), kind, k, v, forwarded)
			if err != nil {
				return nil, err
			}
			vals[k] = sealed
		}
	}
	cmd := &pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{Server: srv, Replace: req.GetReplace()}}}
	res, err := applyAs[*pb.McpServer](ctx, m.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.AddMcpServerResponse{Server: publicMcpServer(res)}, nil
}

// sealMcpValue seals a header or environment value before it enters the
// Raft log; a value sealed already is accepted only from another node.
func sealMcpValue(st *raftstore.State, server, kind, name, value string, forwarded bool) (string, error) {
	if value == "" {
		return "", invalid("mcp server %q: %s %s has an empty value", server, kind, name)
	}
	if raftstore.IsSealed(value) {
		if !forwarded {
			return "", invalid("mcp server %q: the value of %s %s starts with %q, which marks a value sealed by a node", server, kind, name, "tgsealed:")
		}
		return value, nil
	}
	v, err := st.SealMcpSecret(server, kind, name, value)
	if err != nil {
		return "", status.Errorf(codes.Internal, "seal %s %s of mcp server %q: %v", kind, name, server, err)
	}
	return v, nil
}

func (m mcpService) ListMcpServers(context.Context, *pb.ListMcpServersRequest) (*pb.ListMcpServersResponse, error) {
	out := &pb.ListMcpServersResponse{}
	for _, srv := range m.s.store.State().McpServers() {
		out.Servers = append(out.Servers, publicMcpServer(srv))
	}
	return out, nil
}

func (m mcpService) GetMcpServer(_ context.Context, req *pb.GetMcpServerRequest) (*pb.GetMcpServerResponse, error) {
	srv := m.s.store.State().McpServer(req.GetName())
	if srv == nil {
		return nil, status.Errorf(codes.NotFound, "mcp server %q: not found", req.GetName())
	}
	out := &pb.GetMcpServerResponse{Server: publicMcpServer(srv)}
	if m.probe != nil {
		out.Status = m.probe.Status(srv.GetName())
	}
	return out, nil
}

func (m mcpService) RemoveMcpServer(ctx context.Context, req *pb.RemoveMcpServerRequest) (*pb.RemoveMcpServerResponse, error) {
	if req.GetName() == "" {
		return nil, invalid("mcp server name is required")
	}
	cmd := &pb.Command{Op: &pb.Command_DeleteMcpServer{DeleteMcpServer: &pb.DeleteMcpServerCommand{Name: req.GetName()}}}
	if _, err := m.s.apply(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.RemoveMcpServerResponse{}, nil
}

func (m mcpService) TestMcpServer(ctx context.Context, req *pb.TestMcpServerRequest) (*pb.TestMcpServerResponse, error) {
	srv := m.s.store.State().McpServer(req.GetName())
	if srv == nil {
		return nil, status.Errorf(codes.NotFound, "mcp server %q: not found", req.GetName())
	}
	if m.probe == nil {
		return nil, status.Error(codes.Unimplemented, "this node has no MCP gateway")
	}
	return m.probe.Test(ctx, srv), nil
}

func (m mcpService) SetMcpTools(ctx context.Context, req *pb.SetMcpToolsRequest) (*pb.SetMcpToolsResponse, error) {
	if (req.GetKeyId() == "") == (req.GetTeamId() == "") {
		return nil, invalid("give exactly one of key_id and team_id")
	}
	if err := raftstore.ValidateMcpTools(req.GetTools()); err != nil {
		return nil, invalid("%s", strings.TrimSuffix(err.Error(), ": "+raftstore.ErrInvalid.Error()))
	}
	tools := slices.Compact(slices.Sorted(slices.Values(req.GetTools())))
	cmd := &pb.Command{Op: &pb.Command_SetMcpTools{SetMcpTools: &pb.SetMcpToolsCommand{
		KeyId: req.GetKeyId(), TeamId: req.GetTeamId(), Tools: tools}}}
	return applyAs[*pb.SetMcpToolsResponse](ctx, m.s, cmd, false)
}
