package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/node/budget"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/ratelimit"
)

// Outcomes of a tool call, as the ledger records them, with the HTTP-like
// status that goes with each.
const (
	outcomeOK          = "ok"
	outcomeToolError   = "tool_error"
	outcomeRefused     = "refused"
	outcomeRateLimited = "rate_limited"
	outcomeBudget      = "budget"
	outcomeCancelled   = "cancelled"
	outcomeTimeout     = "timeout"
	outcomeUpstream    = "upstream_error"
)

var outcomeStatus = map[string]int32{outcomeOK: 200, outcomeToolError: 200, outcomeRefused: 403,
	outcomeRateLimited: 429, outcomeBudget: 402, outcomeCancelled: 499, outcomeTimeout: 504, outcomeUpstream: 502}

// codeGateway is the JSON-RPC error code of a call the gateway refused
// (rate limit, budget, unavailable upstream).
const codeGateway = -32000

// codeRejected is the code of the error the SDK's client returns when the
// transport failed (no connection, an HTTP error without a JSON-RPC
// answer): the server did not answer, so the upstream is cooled down. A
// sessionless upstream has no session that could end instead.
const codeRejected = -32005

// middleware answers the tools, prompts and resources methods for a
// scope (handle); every other method goes to the SDK's own handling.
func (g *Gateway) middleware(scope string) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if res, ok, err := g.handle(ctx, scope, req); ok {
				return res, err
			}
			res, err := next(ctx, method, req)
			if method == "initialize" && err == nil {
				g.sessionStarted(req)
			}
			return res, err
		}
	}
}

// handle answers the methods the gateway forwards; ok is false for the
// others. Both the SDK's servers (middleware) and the sessionless fast
// path (fast.go) come here.
func (g *Gateway) handle(ctx context.Context, scope string, req sdk.Request) (res sdk.Result, ok bool, err error) {
	switch r := req.(type) {
	case *sdk.ListToolsRequest:
		res, err = g.listTools(scope, r)
	case *sdk.CallToolRequest:
		res, err = g.callTool(ctx, scope, r)
	case *sdk.ListPromptsRequest:
		res, err = g.listPromptsFor(scope, r)
	case *sdk.GetPromptRequest:
		res, err = g.getPrompt(ctx, scope, r)
	case *sdk.ListResourcesRequest:
		res, err = g.listResourcesFor(scope, r)
	case *sdk.ListResourceTemplatesRequest:
		res, err = g.listTemplatesFor(scope, r)
	case *sdk.ReadResourceRequest:
		res, err = g.readResource(ctx, scope, r)
	default:
		return nil, false, nil
	}
	return res, true, err
}

// keyOf returns the key that authenticated the request.
func keyOf(req sdk.Request) (*raftstore.Key, error) {
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		if k, ok := ex.TokenInfo.Extra[keyExtra].(*raftstore.Key); ok {
			return k, nil
		}
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no Tollgate key on this request"}
}

// listTools lists the tools of the upstreams in scope that the key may
// use. Tools of an upstream that is down are listed as last seen, marked
// unavailable, rather than failing the list.
func (g *Gateway) listTools(scope string, req *sdk.ListToolsRequest) (sdk.Result, error) {
	tools, err := listAllowed(g, scope, req, (*upstream).snapshot,
		func(u *upstream, t *sdk.Tool) string { return u.name + raftstore.McpToolSeparator + t.Name },
		func(u *upstream, c *sdk.Tool, ns string, up bool) {
			if scope == "" {
				c.Name = ns
			}
			if !up {
				c.Description = "[unavailable: MCP server " + u.name + " is not reachable from the gateway right now] " + c.Description
				c.Meta = sdk.Meta{"tollgate/unavailable": true}
			}
		})
	if err != nil {
		return nil, err
	}
	return &sdk.ListToolsResult{Tools: tools}, nil
}

// listAllowed gathers the items of the upstreams in scope (as items
// gives them, with whether the upstream is up) whose allow-list name
// (name) the key's policy allows; each is a copy that adapt may change
// (the name it gets on /mcp, a mark). Never nil.
func listAllowed[T any](g *Gateway, scope string, req sdk.Request, items func(*upstream) ([]*T, bool),
	name func(*upstream, *T) string, adapt func(u *upstream, c *T, name string, up bool)) ([]*T, error) {
	key, err := keyOf(req)
	if err != nil {
		return nil, err
	}
	policy := g.cfg.State.State().McpPolicy(key.ID, key.TeamID)
	out := []*T{}
	for _, u := range g.upstreams(scope) {
		list, up := items(u)
		for _, t := range list {
			n := name(u, t)
			if !policy.Allows(n) {
				continue
			}
			c := *t
			adapt(u, &c, n, up)
			out = append(out, &c)
		}
	}
	return out, nil
}

// call is one tool call on its way through the gateway.
type call struct {
	g      *Gateway
	start  time.Time
	rec    *pb.SpendRecord
	res    *budget.Reservation
	ticket *ratelimit.Ticket
	cost   int64
}

// request is one forwarded request that is governed like a tool call:
// a tools/call, prompts/get or resources/read.
type request struct {
	kind     string // "tool", "prompt" or "resource"
	model    string // the record's model: "mcp:NS", "mcp-prompt:NS" or "mcp-resource:SERVER"
	server   string
	name     string // the upstream's own name (a resource's URI)
	label    string // the name the client used, for refusals
	reqBytes int
	allowed  func(raftstore.McpPolicy) bool
	// send forwards the request on sess; priced says whether the server's
	// per-call price applies (tool calls only).
	send   func(ctx context.Context, u *upstream, sess *sdk.ClientSession) (sdk.Result, error)
	priced bool
}

// callTool authorizes, limits and forwards one tool call, and records it.
func (g *Gateway) callTool(ctx context.Context, scope string, req *sdk.CallToolRequest) (sdk.Result, error) {
	p := req.Params
	server, tool, ns := splitTool(scope, p.Name)
	return g.governed(ctx, req, &request{kind: "tool", model: "mcp:" + sanitize(ns), server: server, name: tool, label: p.Name,
		reqBytes: len(p.Arguments), allowed: func(pol raftstore.McpPolicy) bool { return !resourceNamed(tool) && pol.Allows(ns) }, priced: true,
		send: func(ctx context.Context, _ *upstream, sess *sdk.ClientSession) (sdk.Result, error) {
			params := &sdk.CallToolParams{Name: tool}
			if len(p.Arguments) > 0 {
				params.Arguments = p.Arguments
			}
			if tok := p.GetProgressToken(); tok != nil && req.Session != nil {
				up, done := g.progress.add(ctx, req.Session, tok, sess)
				defer done()
				params.SetProgressToken(up)
			}
			return sess.CallTool(ctx, params)
		}})
}

// governed checks the key's allow-list, applies its rate limits (and
// budgets, for priced calls), forwards the request and records it.
func (g *Gateway) governed(ctx context.Context, req sdk.Request, r *request) (sdk.Result, error) {
	key, err := keyOf(req)
	if err != nil {
		return nil, err
	}
	c := &call{g: g, start: g.now(), rec: &pb.SpendRecord{
		RequestId: g.nextID(), Node: g.cfg.NodeID, KeyId: key.ID, TeamId: key.TeamID,
		Model: r.model, Deployment: sanitize(r.server), Provider: "mcp", Endpoint: "mcp",
		McpServer: sanitize(r.server), McpTool: sanitize(r.name), RequestBytes: int64(r.reqBytes),
	}}
	defer c.finish()
	st := g.cfg.State.State()
	u := g.upstream(r.server)
	if u == nil || !r.allowed(st.McpPolicy(key.ID, key.TeamID)) {
		c.rec.Outcome = outcomeRefused
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("Unknown %s %q, or not allowed for this key.", r.kind, r.label)}
	}
	price := int64(0)
	if r.priced {
		price = u.cfg.GetPricePerCallNanos()
	}
	if err := c.admit(ctx, st, key, price); err != nil {
		return nil, err
	}
	sess, why := u.sessionAfterReopen(ctx)
	if sess == nil {
		c.rec.Outcome = outcomeUpstream
		return nil, &jsonrpc.Error{Code: codeGateway, Message: fmt.Sprintf("MCP server %s is unavailable: %s", r.server, why)}
	}
	return c.forward(ctx, u, sess, r, price)
}

// admit applies the key's and team's rate limits and reserves a priced
// call's cost from their budgets.
func (c *call) admit(ctx context.Context, st *raftstore.State, key *raftstore.Key, price int64) error {
	g := c.g
	if g.cfg.Limiter != nil {
		if checks := limitChecks(st, key); len(checks) > 0 {
			t, ref := g.cfg.Limiter.Admit(checks, 0)
			if ref != nil {
				c.rec.Outcome = outcomeRateLimited
				secs := max(int64(ref.RetryAfter.Round(time.Second)/time.Second), 1)
				return &jsonrpc.Error{Code: codeGateway, Message: fmt.Sprintf("Rate limit reached (%s of %s); retry after %ds.", ref.Reason, ref.Bucket, secs),
					Data: json.RawMessage(`{"retry_after_seconds":` + strconv.FormatInt(secs, 10) + `}`)}
			}
			c.ticket = t
		}
	}
	if price <= 0 || g.cfg.Budgets == nil {
		return nil
	}
	limits := budgetsOf(st, key)
	if len(limits) == 0 {
		return nil
	}
	res, err := g.cfg.Budgets.Reserve(ctx, limits, price, g.now())
	if err != nil {
		c.rec.Outcome = outcomeBudget
		return &jsonrpc.Error{Code: codeGateway, Message: "Budget exceeded: " + err.Error()}
	}
	c.res = res
	return nil
}

// forward sends the request upstream (a tool call relays its progress
// notifications); cancelling ctx (the client cancelled) cancels the
// upstream request. An answer costs price. A request the upstream refused
// because it lost the session never reached a tool: it is sent again,
// once, on a new session (sessionlost.go).
func (c *call) forward(ctx context.Context, u *upstream, sess *sdk.ClientSession, r *request, price int64) (sdk.Result, error) {
	timeout := c.g.cfg.CallTimeout
	if ms := u.cfg.GetTimeoutMs(); ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := r.send(cctx, u, sess)
	if code := refusalCode(err); code != 0 {
		if ns := u.recover(cctx, sess, code == codeSessionLost); ns != nil {
			sess = ns
			res, err = r.send(cctx, u, ns)
		}
	}
	switch {
	case err == nil:
		u.answered(sess)
		c.cost = price
		c.rec.Outcome = outcomeOK
		if tr, ok := res.(*sdk.CallToolResult); ok && tr.IsError {
			c.rec.Outcome = outcomeToolError
		}
		if b, merr := json.Marshal(res); merr == nil {
			c.rec.ResponseBytes = int64(len(b))
		}
		return res, nil
	case ctx.Err() != nil:
		c.rec.Outcome = outcomeCancelled
		return nil, ctx.Err()
	case cctx.Err() != nil:
		c.rec.Outcome = outcomeTimeout
		return nil, &jsonrpc.Error{Code: codeGateway, Message: fmt.Sprintf("MCP server %s did not answer within %s.", u.name, timeout)}
	}
	return nil, c.failed(u, sess, r, err, price)
}

// failed records and answers a request the upstream did not answer with
// a result. Not charged unless the server answered with its own error.
func (c *call) failed(u *upstream, sess *sdk.ClientSession, r *request, err error, price int64) error {
	c.rec.Outcome = outcomeUpstream
	var werr *jsonrpc.Error
	switch {
	case !errors.As(err, &werr) || werr.Code == codeRejected:
		u.fail(sess, r.kind+": "+err.Error())
		return &jsonrpc.Error{Code: codeGateway, Message: fmt.Sprintf("MCP server %s failed; it is cooling down.", u.name)}
	case werr.Code == codeSessionLost:
		// Refused at the HTTP level, and no new session to send it on.
		return &jsonrpc.Error{Code: codeUpstreamRefused, Message: werr.Message}
	case werr.Code == codeUpstreamRefused, werr.Code == codeAnswerTooLarge:
		// Refused at the HTTP level, or an answer past the bound: not the
		// server's failure, not charged.
		return werr
	}
	u.answered(sess)
	c.cost = price // the server answered
	return werr
}

// finish releases the call's limits, settles its budgets and records it.
func (c *call) finish() {
	if c.ticket != nil {
		c.ticket.Done(0)
	}
	r := c.rec
	r.UnixNanos = c.start.UnixNano()
	r.LatencyMicros = c.g.now().Sub(c.start).Microseconds()
	r.Status = outcomeStatus[r.Outcome]
	r.CostNanos = c.cost
	var uses []*pb.BudgetUse
	if c.res != nil {
		c.g.cfg.Budgets.Settle(c.res, c.cost)
		uses = c.res.Uses(c.cost)
	}
	c.g.cfg.Record(r, uses)
}

// splitTool returns the server, the upstream's tool name and the
// namespaced name of a tool a client asked for.
func splitTool(scope, name string) (server, tool, ns string) {
	if scope != "" {
		return scope, name, scope + raftstore.McpToolSeparator + name
	}
	server, tool, _ = strings.Cut(name, raftstore.McpToolSeparator)
	return server, tool, name
}

// sanitize makes a client-supplied name safe for the ledger (no NUL, at
// most 256 bytes).
func sanitize(s string) string {
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) > 256 {
		s = s[:256]
	}
	return s
}

func (g *Gateway) nextID() string {
	return g.idPrefix + strconv.FormatUint(g.ids.Add(1), 36)
}

// limitChecks returns the rate-limit buckets a key's calls count in: the
// key's and its team's, shared with its model requests.
func limitChecks(st *raftstore.State, key *raftstore.Key) []ratelimit.Check {
	var out []ratelimit.Check
	add := func(l *raftstore.RateLimits) {
		if l != nil {
			out = append(out, ratelimit.Check{Bucket: l.Bucket, Limits: ratelimit.Limits{RPM: l.RPM, TPM: l.TPM, MaxParallel: l.MaxParallel}})
		}
	}
	add(key.Limits)
	if t := st.Team(key.TeamID); key.TeamID != "" && t != nil {
		add(t.Limits)
	}
	return out
}

// budgetsOf returns the budgets a key's priced calls count against.
func budgetsOf(st *raftstore.State, key *raftstore.Key) []*raftstore.Limit {
	var out []*raftstore.Limit
	if key.Budget != nil {
		out = append(out, key.Budget)
	}
	if t := st.Team(key.TeamID); key.TeamID != "" && t != nil && t.Budget != nil {
		out = append(out, t.Budget)
	}
	return out
}

// progressRouter relays upstream progress notifications to the client
// whose call they belong to. Each forwarded call gets a token of its own
// upstream (clients' tokens may collide).
//
// The SDK hands a notification to its handler on a goroutine of its own
// while the call's response, read after it, completes the call; so when a
// call returns, its last notifications may still be on their way. done
// waits for them: until no notification for the token has been relayed
// for progressQuiet, at most progressDrain.
type progressRouter struct {
	mu   sync.Mutex
	next uint64
	m    map[string]*progressTarget
}

const (
	progressQuiet = 2 * time.Millisecond
	progressDrain = 100 * time.Millisecond
)

type progressTarget struct {
	ctx   context.Context // the client's call, which the notification relates to
	sess  *sdk.ServerSession
	from  *sdk.ClientSession // the upstream session the call went to; only it may report progress
	token any
	last  time.Time // when a notification was last relayed
}

func (p *progressRouter) add(ctx context.Context, sess *sdk.ServerSession, token any, from *sdk.ClientSession) (string, func()) {
	p.mu.Lock()
	p.next++
	up := "tollgate-" + strconv.FormatUint(p.next, 36)
	p.m[up] = &progressTarget{ctx: ctx, sess: sess, token: token, from: from}
	p.mu.Unlock()
	return up, func() { p.done(up) }
}

func (p *progressRouter) done(up string) {
	start := time.Now()
	for {
		p.mu.Lock()
		t := p.m[up]
		quiet := time.Since(t.last) >= progressQuiet && time.Since(start) >= progressQuiet
		if quiet || time.Since(start) >= progressDrain {
			delete(p.m, up)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// forward is the upstream clients' progress handler.
func (p *progressRouter) forward(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	tok, _ := req.Params.ProgressToken.(string)
	p.mu.Lock()
	t, ok := p.m[tok]
	ok = ok && t.from == req.Session // another upstream cannot guess its way into a call
	if ok {
		t.last = time.Now()
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	_ = t.sess.NotifyProgress(t.ctx, &sdk.ProgressNotificationParams{ProgressToken: t.token,
		Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
	p.mu.Lock()
	t.last = time.Now()
	p.mu.Unlock()
}
