// Package mcp is Tollgate's MCP gateway: one Streamable HTTP endpoint
// (/mcp, and /mcp/NAME for one server) in front of the upstream MCP
// servers of the replicated state. It authenticates Tollgate keys,
// aggregates the upstreams' tools under namespaced names
// ("server__tool"), filters them by the key's and team's allow-lists,
// applies the key's rate limits and budgets to tool calls, forwards
// calls, progress notifications and cancellations, and records every call
// in the ledger. It is built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/node/budget"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/ratelimit"
)

// StateSource yields the current control state; it must not block.
type StateSource interface {
	State() *raftstore.State
}

// Limiter admits tool calls against the key's and team's rate limits
// (the same buckets model requests count in).
type Limiter interface {
	Admit(checks []ratelimit.Check, estTokens int64) (*ratelimit.Ticket, *ratelimit.Refusal)
}

// Budgets holds budget reservations for priced tool calls.
type Budgets interface {
	Reserve(ctx context.Context, limits []*raftstore.Limit, estimate int64, now time.Time) (*budget.Reservation, error)
	Settle(r *budget.Reservation, cost int64)
}

// Config configures a Gateway.
type Config struct {
	State StateSource
	// Ready reports whether State is current; until it is, requests get
	// 503. Nil: always ready.
	Ready func() bool
	// Limiter and Budgets may be nil: then no limit or budget applies.
	Limiter Limiter
	Budgets Budgets
	// Record receives every tool call's ledger record and the budget uses
	// it settled; it must not keep rec.
	Record func(rec *pb.SpendRecord, uses []*pb.BudgetUse)
	// NodeID goes into records and statuses; Version into the MCP
	// implementation info.
	NodeID, Version string
	// Cooldown is how long a failing upstream is left alone, doubling up
	// to MaxCooldown; defaults 2s and 1m.
	Cooldown, MaxCooldown time.Duration
	// ConnectTimeout bounds connecting to an upstream and listing its
	// tools; default 10s. CallTimeout bounds a tool call of a server that
	// sets none; default 60s.
	ConnectTimeout, CallTimeout time.Duration
	// SyncInterval is how often the configured servers are compared with
	// the connected ones; default 250ms.
	SyncInterval time.Duration
	// SessionTimeout closes idle client sessions; default 30m.
	SessionTimeout time.Duration
	// MaxSessionsPerKey caps the client sessions one key holds; opening
	// one more closes its least recently used one. Default 64.
	MaxSessionsPerKey int
	// MaxUpstreamMessageBytes bounds what is read of one message from an
	// upstream (a JSON answer, an event of a stream); a call whose answer
	// is larger fails (limit.go). Default 16 MiB.
	MaxUpstreamMessageBytes int
	// Transport carries upstream HTTP requests; default a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	Logger    *slog.Logger
}

// Gateway is the MCP gateway of one node.
type Gateway struct {
	cfg           Config
	log           *slog.Logger
	httpTransport http.RoundTripper
	now           func() time.Time
	progress      progressRouter
	ids           atomic.Uint64
	idPrefix      string
	impl          *sdk.Implementation // this gateway, as it introduces itself
	sessions      *sessionRegistry

	mu    sync.RWMutex
	ups   map[string]*upstream
	names []string // sorted

	servers   sync.Map // scope ("" or a server name) → *sdk.Server
	stateful  http.Handler
	stateless http.Handler
	authed    http.Handler
}

// New returns a Gateway; Run keeps its upstream connections.
func New(cfg Config) *Gateway {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = 2 * time.Second
	}
	if cfg.MaxCooldown < cfg.Cooldown {
		cfg.MaxCooldown = max(time.Minute, cfg.Cooldown)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 60 * time.Second
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 250 * time.Millisecond
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 30 * time.Minute
	}
	if cfg.MaxSessionsPerKey <= 0 {
		cfg.MaxSessionsPerKey = 64
	}
	if cfg.MaxUpstreamMessageBytes <= 0 {
		cfg.MaxUpstreamMessageBytes = defaultMaxUpstreamMessage
	}
	if cfg.Record == nil {
		cfg.Record = func(*pb.SpendRecord, []*pb.BudgetUse) {}
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, now: time.Now, ups: map[string]*upstream{},
		httpTransport: cfg.Transport, idPrefix: "mcp_" + randomHex(6) + "_"}
	if g.httpTransport == nil {
		g.httpTransport = http.DefaultTransport.(*http.Transport).Clone()
	}
	g.sessions = newSessionRegistry(cfg.MaxSessionsPerKey, time.Now)
	g.impl = &sdk.Implementation{Name: "tollgate", Title: "Tollgate MCP gateway", Version: cfg.Version}
	g.progress.m = map[string]*progressTarget{}
	g.initHTTP()
	return g
}

// Run keeps the node's upstream sessions in line with the configured
// servers until ctx is done, then closes them.
func (g *Gateway) Run(ctx context.Context) {
	t := time.NewTicker(g.cfg.SyncInterval)
	defer t.Stop()
	defer g.Close()
	var last *raftstore.State
	for {
		if st := g.cfg.State.State(); st != last {
			g.reconcile(st)
			last = st
		}
		g.dialDue(ctx)
		g.closeIdle()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reconcile adds, replaces and removes upstreams to match st.
func (g *Gateway) reconcile(st *raftstore.State) {
	want := st.McpServers()
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := make(map[string]bool, len(want))
	for _, cfg := range want {
		seen[cfg.GetName()] = true
		if u := g.ups[cfg.GetName()]; u != nil && u.cfg == cfg {
			continue // unchanged: states share unchanged servers
		} else if u != nil {
			go u.close()
		}
		g.ups[cfg.GetName()] = newUpstream(g, cfg)
	}
	for name, u := range g.ups {
		if !seen[name] {
			delete(g.ups, name)
			go u.close()
		}
	}
	g.names = g.names[:0]
	for name := range g.ups {
		g.names = append(g.names, name)
	}
	sort.Strings(g.names)
}

func (g *Gateway) dialDue(ctx context.Context) {
	now := g.now()
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, u := range g.ups {
		if u.due(now) {
			go u.connect(ctx)
		}
	}
}

// Close closes every upstream session (and stops stdio servers).
func (g *Gateway) Close() {
	g.mu.Lock()
	ups := g.ups
	g.ups, g.names = map[string]*upstream{}, nil
	g.mu.Unlock()
	for _, u := range ups {
		u.close()
	}
}

func (g *Gateway) upstream(name string) *upstream {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.ups[name]
}

// upstreams returns the upstreams in scope (all for ""), by name.
func (g *Gateway) upstreams(scope string) []*upstream {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if scope != "" {
		if u := g.ups[scope]; u != nil {
			return []*upstream{u}
		}
		return nil
	}
	out := make([]*upstream, 0, len(g.names))
	for _, n := range g.names {
		out = append(out, g.ups[n])
	}
	return out
}

// Status returns how this node sees the server called name, or nil when
// it does not know it.
func (g *Gateway) Status(name string) *pb.McpServerStatus {
	if u := g.upstream(name); u != nil {
		return u.status(g.cfg.NodeID)
	}
	return nil
}

// Test connects to a configured server afresh, lists its tools and
// closes the session.
func (g *Gateway) Test(ctx context.Context, cfg *pb.McpServer) *pb.TestMcpServerResponse {
	out := &pb.TestMcpServerResponse{Node: g.cfg.NodeID}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.ConnectTimeout)
	defer cancel()
	start := time.Now()
	sess, err := g.dial(ctx, cfg, nil)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer func() { _ = sess.Close() }()
	tools, err := listTools(ctx, sess)
	out.LatencyMicros = time.Since(start).Microseconds()
	if err != nil {
		out.Error = "list tools: " + err.Error()
		return out
	}
	out.Ok = true
	if ir := sess.InitializeResult(); ir != nil {
		out.ProtocolVersion = ir.ProtocolVersion
	}
	for _, t := range tools {
		out.Tools = append(out.Tools, t.Name)
	}
	return out
}

// server returns the MCP server for a scope: "" aggregates every
// upstream, a name serves that one only.
func (g *Gateway) server(scope string) *sdk.Server {
	if s, ok := g.servers.Load(scope); ok {
		return s.(*sdk.Server)
	}
	s := sdk.NewServer(g.impl,
		&sdk.ServerOptions{
			Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Prompts: &sdk.PromptCapabilities{},
				Resources: &sdk.ResourceCapabilities{}},
			Instructions: "Tools of the MCP servers behind this Tollgate gateway, named SERVER__TOOL.",
		})
	s.AddReceivingMiddleware(g.middleware(scope))
	actual, _ := g.servers.LoadOrStore(scope, s)
	return actual.(*sdk.Server)
}

func timestamp(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
