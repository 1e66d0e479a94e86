package raftstore

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// MCP server transports.
const (
	McpTransportHTTP  = "http"
	McpTransportSSE   = "sse"
	McpTransportStdio = "stdio"
)

// McpToolSeparator joins a server's name and a tool's own name into the
// name a client of the gateway sees ("github__create_issue").
const McpToolSeparator = "__"

// McpServers returns every upstream MCP server, sorted by name. Header and
// environment values are stored sealed: open them with OpenMcpSecret.
func (s *State) McpServers() []*pb.McpServer {
	out := make([]*pb.McpServer, 0, len(s.mcpServers))
	for _, m := range s.mcpServers {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// McpServer returns the upstream MCP server called name, or nil.
func (s *State) McpServer(name string) *pb.McpServer { return s.mcpServers[name] }

// mcpSecretName is what a header or environment value is sealed for: a
// sealed value copied to another server or header does not open.
func mcpSecretName(server, kind, name string) string {
	return "mcp/" + server + "/" + kind + "/" + name
}

// SealMcpSecret returns the stored form of a header ("header") or
// environment ("env") value of server: sealed when this node has a
// secrets key.
func (s *State) SealMcpSecret(server, kind, name, value string) (string, error) {
	return s.SealCredential(mcpSecretName(server, kind, name), value)
}

// OpenMcpSecret returns a header or environment value from its stored form.
func (s *State) OpenMcpSecret(server, kind, name, stored string) (string, error) {
	return s.sealer.Open(mcpSecretName(server, kind, name), stored)
}

// ResealMcpServer returns m with its header and environment values sealed
// (again) with this node's key, and whether any needed it: values in the
// clear, or sealed with a key being rotated out. Values that do not open
// here are left alone.
func (s *State) ResealMcpServer(m *pb.McpServer) (*pb.McpServer, bool, error) {
	out := proto.Clone(m).(*pb.McpServer)
	changed := false
	for kind, vals := range map[string]map[string]string{"header": out.GetHeaders(), "env": out.GetEnv()} {
		for k, v := range vals {
			name := mcpSecretName(m.GetName(), kind, k)
			if !s.NeedsSeal(name, v) {
				continue
			}
			clear, err := s.sealer.Open(name, v)
			if err != nil {
				return nil, false, err
			}
			if vals[k], err = s.sealer.Seal(name, clear); err != nil {
				return nil, false, err
			}
			changed = true
		}
	}
	return out, changed, nil
}

// McpPolicy is the MCP tool allow-list that applies to one key: its own
// and its team's.
type McpPolicy struct{ key, team []string }

// McpPolicy returns the allow-lists of the key and of its team.
func (s *State) McpPolicy(keyID, teamID string) McpPolicy {
	var p McpPolicy
	if k := s.KeyByID(keyID); k != nil {
		p.key = k.mcpTools()
	}
	if teamID != "" {
		p.team = s.TeamConfig(teamID).GetMcpTools()
	}
	return p
}

// Allows reports whether the namespaced tool is allowed: the key's list
// and its team's list must each allow it when set, and at least one of
// them must be set (a key without either reaches no tool).
func (p McpPolicy) Allows(tool string) bool {
	if len(p.key) == 0 && len(p.team) == 0 {
		return false
	}
	return listAllows(p.key, tool) && listAllows(p.team, tool)
}

// listAllows: an empty list allows everything (the other list decides).
func listAllows(list []string, name string) bool {
	if len(list) == 0 {
		return true
	}
	return slices.ContainsFunc(list, func(p string) bool { return MatchPattern(p, name) })
}

// ValidateMcpServer checks a server's configuration.
func ValidateMcpServer(m *pb.McpServer) error {
	if err := validMcpName(m.GetName()); err != nil {
		return err
	}
	switch m.GetTransport() {
	case McpTransportHTTP, McpTransportSSE, "":
		u, err := url.Parse(m.GetUrl())
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcp server %q: url %q must be an absolute http or https URL: %w", m.GetName(), m.GetUrl(), ErrInvalid)
		}
		if len(m.GetCommand()) > 0 || len(m.GetEnv()) > 0 {
			return fmt.Errorf("mcp server %q: a command and its environment are for stdio servers: %w", m.GetName(), ErrInvalid)
		}
	case McpTransportStdio:
		if len(m.GetCommand()) == 0 || m.GetCommand()[0] == "" {
			return fmt.Errorf("mcp server %q: a stdio server needs a command: %w", m.GetName(), ErrInvalid)
		}
		if m.GetUrl() != "" || len(m.GetHeaders()) > 0 || m.GetCredential() != "" {
			return fmt.Errorf("mcp server %q: a stdio server takes no url, headers or credential: %w", m.GetName(), ErrInvalid)
		}
	default:
		return fmt.Errorf("mcp server %q: unknown transport %q; one of http, sse, stdio: %w", m.GetName(), m.GetTransport(), ErrInvalid)
	}
	if m.GetPricePerCallNanos() < 0 {
		return fmt.Errorf("mcp server %q: negative price: %w", m.GetName(), ErrInvalid)
	}
	for h := range m.GetHeaders() {
		if h == "" || strings.ContainsAny(h, " :\r\n") {
			return fmt.Errorf("mcp server %q: header name %q: %w", m.GetName(), h, ErrInvalid)
		}
	}
	return nil
}

func validMcpName(name string) error {
	// A trailing '_' would make "name__tool" ambiguous ("a_"+"__"+"x" is
	// "a"+"__"+"_x").
	ok := name != "" && len(name) <= 64 && !strings.Contains(name, McpToolSeparator) && !strings.HasSuffix(name, "_")
	for _, r := range name {
		ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}
	if !ok {
		return fmt.Errorf("mcp server name %q: 1-64 lowercase letters, digits, '-' and '_', without %q and not ending in '_': %w",
			name, McpToolSeparator, ErrInvalid)
	}
	return nil
}

func putMcpServer(cur *State, c *pb.PutMcpServerCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	m := c.GetServer()
	if err := ValidateMcpServer(m); err != nil {
		return nil, nil, err
	}
	old := cur.mcpServers[m.GetName()]
	if r := c.GetResealOf(); r != nil && (old == nil || !proto.Equal(old, r)) {
		return nil, nil, fmt.Errorf("mcp server %q changed since it was read for resealing: %w", m.GetName(), ErrFailedPrecondition)
	}
	if old != nil && !c.GetReplace() && c.GetResealOf() == nil {
		return nil, nil, fmt.Errorf("mcp server %q: %w", m.GetName(), ErrAlreadyExists)
	}
	if n := m.GetCredential(); n != "" && cur.creds[n] == nil {
		return nil, nil, fmt.Errorf("credential %q does not exist: %w", n, ErrFailedPrecondition)
	}
	m = proto.Clone(m).(*pb.McpServer)
	if m.Transport == "" {
		m.Transport = McpTransportHTTP
	}
	m.CreatedAt, m.UpdatedAt = ts, ts
	if old != nil {
		m.CreatedAt = old.GetCreatedAt()
	}
	if c.GetResealOf() != nil {
		m.UpdatedAt = old.GetUpdatedAt()
	}
	next := *cur
	next.mcpServers = maps.Clone(cur.mcpServers)
	if next.mcpServers == nil {
		next.mcpServers = map[string]*pb.McpServer{}
	}
	next.mcpServers[m.GetName()] = m
	return &next, m, nil
}

func deleteMcpServer(cur *State, name string) (*State, error) {
	if cur.mcpServers[name] == nil {
		return nil, fmt.Errorf("mcp server %q: %w", name, ErrNotFound)
	}
	next := *cur
	next.mcpServers = maps.Clone(cur.mcpServers)
	delete(next.mcpServers, name)
	return &next, nil
}

// ValidateMcpTools checks an allow-list.
func ValidateMcpTools(tools []string) error {
	for _, t := range tools {
		if t == "" || strings.ContainsAny(t, " \t\r\n") {
			return fmt.Errorf("mcp tool pattern %q: %w", t, ErrInvalid)
		}
	}
	return nil
}

func setMcpTools(cur *State, c *pb.SetMcpToolsCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	if (c.GetKeyId() == "") == (c.GetTeamId() == "") {
		return nil, nil, fmt.Errorf("set mcp tools: give a key or a team: %w", ErrInvalid)
	}
	if err := ValidateMcpTools(c.GetTools()); err != nil {
		return nil, nil, err
	}
	tools := slices.Clone(c.GetTools())
	res := &pb.SetMcpToolsResponse{Tools: tools}
	if id := c.GetKeyId(); id != "" {
		old, err := cur.keyOrErr(id)
		if err != nil {
			return nil, nil, err
		}
		old.Key.McpTools, old.Key.UpdatedAt = tools, ts // old is decoded for this command
		next, err := cur.putKey(old)
		return next, res, err
	}
	old := cur.TeamConfig(c.GetTeamId())
	if old == nil {
		return nil, nil, fmt.Errorf("team %q: %w", c.GetTeamId(), ErrNotFound)
	}
	t := proto.Clone(old).(*pb.Team)
	t.McpTools, t.UpdatedAt = tools, ts
	return cur.putTeam(t), res, nil
}

// addMcpServers adds the servers of a snapshot part to a state being built.
func addMcpServers(st *State, servers []*pb.McpServer) {
	if len(servers) == 0 {
		return
	}
	if st.mcpServers == nil {
		st.mcpServers = map[string]*pb.McpServer{}
	}
	for _, m := range servers {
		st.mcpServers[m.GetName()] = m
	}
}
