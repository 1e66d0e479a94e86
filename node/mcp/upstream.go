package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// Upstream states, as McpServerStatus reports them.
const (
	stateConnected  = "connected"
	stateConnecting = "connecting"
	stateCooling    = "cooling_down"
)

// maxToolPages bounds the pages of one upstream's tools/list.
const maxToolPages = 50

// upstream is this node's connection to one configured MCP server: one
// client session shared by every call, its tools as last listed, and its
// cooldown after a failure. A failed session is closed and reconnected
// after the cooldown (doubling up to maxCooldown); for a stdio server
// that restarts the process.
type upstream struct {
	g    *Gateway
	name string
	cfg  *pb.McpServer // the configuration it was built from

	mu      sync.Mutex
	sess    *sdk.ClientSession
	state   string
	tools   []*sdk.Tool // the upstream's own names
	prompts []*sdk.Prompt
	// resources and templates as last listed (upstream URIs)
	resources []*sdk.Resource
	templates []*sdk.ResourceTemplate
	stop      context.CancelFunc // ends the session's context
	lastErr   string
	retryAt   time.Time
	failures  int
	dialing   bool
	closed    bool
	runCtx    context.Context // the gateway's run, which sessions live in
	ping      *pingCheck      // after a refusal (sessionlost.go)
	reopened  chan struct{}   // closed when the last reopen's dial ended
	// fresh is the session the last reopen opened until a request on it
	// is answered, and reopenedAt when (sessionlost.go).
	fresh      atomic.Pointer[sdk.ClientSession]
	reopenedAt time.Time
}

func newUpstream(g *Gateway, cfg *pb.McpServer) *upstream {
	return &upstream{g: g, name: cfg.GetName(), cfg: cfg, state: stateConnecting}
}

// session returns the live session, or nil and why there is none.
func (u *upstream) session() (*sdk.ClientSession, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != nil {
		return u.sess, ""
	}
	if u.lastErr != "" {
		// Not the error itself: it may quote the server's URL, query and
		// all, which is the operators' (tollctl mcp get shows it).
		return nil, "it failed and is cooling down"
	}
	return nil, "not connected yet"
}

// snapshot returns the tools as last listed and whether the server is up.
func (u *upstream) snapshot() ([]*sdk.Tool, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools, u.sess != nil
}

// due reports whether the upstream needs a connection attempt now, and
// claims it.
func (u *upstream) due(now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.sess != nil || u.dialing || now.Before(u.retryAt) {
		return false
	}
	u.dialing = true
	return true
}

// connect opens a session, lists the tools and watches the session. The
// session lives in a context of its own, derived from ctx (the gateway's
// run): an HTTP+SSE session's stream lasts as long as the context it was
// opened with, so only the connection attempt is bounded.
func (u *upstream) connect(ctx context.Context) {
	sctx, stop := context.WithCancel(ctx)
	timer := time.AfterFunc(u.g.cfg.ConnectTimeout, stop)
	sess, err := u.g.dial(sctx, u.cfg, u)
	var l lists
	if err == nil {
		if l, err = listEverything(sctx, sess); err != nil {
			_ = sess.Close()
		}
	}
	if !timer.Stop() && err == nil {
		_ = sess.Close()
		err = fmt.Errorf("no answer within %s", u.g.cfg.ConnectTimeout)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.dialing = false
	if err != nil {
		stop()
		u.coolLocked(fmt.Sprintf("connect: %v", err))
		return
	}
	if u.closed {
		stop()
		_ = sess.Close()
		return
	}
	u.sess, u.stop, u.state, u.failures, u.lastErr, u.runCtx = sess, stop, stateConnected, 0, "", ctx
	u.tools, u.prompts, u.resources, u.templates = l.tools, l.prompts, l.resources, l.templates
	go u.watch(sess)
}

// lists are what an upstream offers.
type lists struct {
	tools     []*sdk.Tool
	prompts   []*sdk.Prompt
	resources []*sdk.Resource
	templates []*sdk.ResourceTemplate
}

// listEverything lists an upstream's tools, prompts and resources.
func listEverything(ctx context.Context, sess *sdk.ClientSession) (lists, error) {
	var l lists
	var err error
	if l.tools, err = listTools(ctx, sess); err != nil {
		return l, err
	}
	if l.prompts, err = listPrompts(ctx, sess); err != nil {
		return l, err
	}
	l.resources, l.templates, err = listResources(ctx, sess)
	return l, err
}

// watch marks the upstream failed when its session ends (a stdio
// server's process exited, the connection broke).
func (u *upstream) watch(sess *sdk.ClientSession) {
	err := sess.Wait()
	if errors.Is(err, sdk.ErrSessionMissing) {
		// The server forgot the session (its standalone stream was
		// refused 404 after a restart): a new one at once.
		u.mu.Lock()
		ctx := u.runCtx
		u.mu.Unlock()
		u.reopen(ctx, sess)
		return
	}
	msg := "session ended"
	if err != nil {
		msg = "session ended: " + err.Error()
	}
	u.fail(sess, msg)
}

// fail puts the upstream in cooldown if sess is still its session.
func (u *upstream) fail(sess *sdk.ClientSession, why string) {
	u.mu.Lock()
	if u.sess != sess || sess == nil {
		u.mu.Unlock()
		return
	}
	why = scrubSessionID(why, sess.ID())
	u.sess = nil
	stop := u.stop
	u.coolLocked(why)
	u.mu.Unlock()
	_ = sess.Close()
	stop()
	u.g.log.Warn("mcp upstream failed; cooling down", "server", u.name, "err", why)
}

func (u *upstream) coolLocked(why string) {
	u.failures++
	d := u.g.cfg.Cooldown << min(u.failures-1, 16)
	d = min(d, u.g.cfg.MaxCooldown)
	u.state, u.lastErr, u.retryAt = stateCooling, scrubSessionID(why, ""), u.g.now().Add(d)
}

// refresh lists the tools, prompts and resources again (the upstream
// said one of them changed).
func (u *upstream) refresh(ctx context.Context) {
	sess, _ := u.session()
	if sess == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, u.g.cfg.ConnectTimeout)
	defer cancel()
	l, err := listEverything(ctx, sess)
	if err != nil {
		u.fail(sess, "list: "+err.Error())
		return
	}
	u.mu.Lock()
	if u.sess == sess {
		u.tools, u.prompts, u.resources, u.templates = l.tools, l.prompts, l.resources, l.templates
	}
	u.mu.Unlock()
}

func (u *upstream) close() {
	u.mu.Lock()
	sess, stop := u.sess, u.stop
	u.sess, u.closed = nil, true
	u.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
		stop()
	}
}

func (u *upstream) status(node string) *pb.McpServerStatus {
	tools, _ := u.snapshot()
	u.mu.Lock()
	defer u.mu.Unlock()
	st := &pb.McpServerStatus{Node: node, State: u.state, LastError: u.lastErr}
	for _, t := range tools {
		st.Tools = append(st.Tools, t.Name)
	}
	if u.state == stateCooling {
		st.RetryAt = timestamp(u.retryAt)
	}
	return st
}

func listTools(ctx context.Context, sess *sdk.ClientSession) ([]*sdk.Tool, error) {
	out, err := listAll(func(cursor string) ([]*sdk.Tool, string, error) {
		res, err := sess.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Tools, res.NextCursor, nil
	})
	out = slices.DeleteFunc(out, func(t *sdk.Tool) bool { return resourceNamed(t.Name) })
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// listAll gathers the pages of a list (at most maxToolPages).
func listAll[T any](page func(cursor string) ([]T, string, error)) ([]T, error) {
	var out []T
	cursor := ""
	for range maxToolPages {
		items, next, err := page(cursor)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			break
		}
		cursor = next
	}
	return out, nil
}

// dial connects a client session to a configured server. Header and
// environment values are opened here, on this node, and never leave it.
//
// It asks for the session protocol first: the gateway keeps one session
// per server for all calls, and a server speaking both eras then keeps
// its state once instead of rebuilding it for every call (the Go SDK's
// sessionless server costs ~0.7 ms more per call). A server that refuses
// it is dialed again with the SDK's latest version.
func (g *Gateway) dial(ctx context.Context, cfg *pb.McpServer, u *upstream) (*sdk.ClientSession, error) {
	st := g.cfg.State.State()
	client := g.newClient(ctx, u)
	t, err := g.transport(st, cfg)
	if err != nil {
		return nil, err
	}
	sess, err := client.Connect(ctx, t, &sdk.ClientSessionOptions{ProtocolVersion: sessionVersion})
	if err == nil || ctx.Err() != nil || cfg.GetTransport() == raftstore.McpTransportStdio {
		return sess, err
	}
	if t, err2 := g.transport(st, cfg); err2 == nil {
		if sess, err2 := client.Connect(ctx, t, nil); err2 == nil {
			return sess, nil
		}
	}
	return nil, err
}

// sessionVersion is the protocol version the gateway asks its upstreams
// for first: the latest with sessions.
const sessionVersion = "2025-11-25"

// newClient returns the client of an upstream's session (u is nil for a
// test connection): progress goes to the router, a changed tool list is
// listed again.
func (g *Gateway) newClient(ctx context.Context, u *upstream) *sdk.Client {
	changed := func() {
		if u != nil {
			go u.refresh(context.WithoutCancel(ctx))
		}
	}
	return sdk.NewClient(&sdk.Implementation{Name: "tollgate", Version: g.cfg.Version}, &sdk.ClientOptions{
		ProgressNotificationHandler: g.progress.forward,
		ToolListChangedHandler:      func(context.Context, *sdk.ToolListChangedRequest) { changed() },
		PromptListChangedHandler:    func(context.Context, *sdk.PromptListChangedRequest) { changed() },
		ResourceListChangedHandler:  func(context.Context, *sdk.ResourceListChangedRequest) { changed() },
	})
}

func (g *Gateway) transport(st *raftstore.State, cfg *pb.McpServer) (sdk.Transport, error) {
	name := cfg.GetName()
	switch cfg.GetTransport() {
	case raftstore.McpTransportStdio:
		cmd := exec.Command(cfg.GetCommand()[0], cfg.GetCommand()[1:]...)
		cmd.Env = os.Environ()
		for k, v := range cfg.GetEnv() {
			val, err := st.OpenMcpSecret(name, "env", k, v)
			if err != nil {
				return nil, fmt.Errorf("environment variable %s: %w", k, err)
			}
			cmd.Env = append(cmd.Env, k+"="+val)
		}
		return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
	case raftstore.McpTransportSSE:
		hc, err := g.httpClient(st, cfg)
		return &sdk.SSEClientTransport{Endpoint: cfg.GetUrl(), HTTPClient: hc, MaxEventSize: g.cfg.MaxUpstreamMessageBytes}, err
	default:
		hc, err := g.httpClient(st, cfg)
		return &sdk.StreamableClientTransport{Endpoint: cfg.GetUrl(), HTTPClient: hc, MaxRetries: 1,
			MaxEventSize: g.cfg.MaxUpstreamMessageBytes}, err
	}
}

// httpClient returns a client that adds the server's headers (and its
// credential, as a bearer token) to every request.
func (g *Gateway) httpClient(st *raftstore.State, cfg *pb.McpServer) (*http.Client, error) {
	h := http.Header{}
	for k, v := range cfg.GetHeaders() {
		val, err := st.OpenMcpSecret(cfg.GetName(), "header", k, v)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		h.Set(k, val)
	}
	if n := cfg.GetCredential(); n != "" {
		c := st.Credential(n)
		if c == nil {
			return nil, fmt.Errorf("credential %q does not exist", n)
		}
		val, err := st.OpenCredential(c)
		if err != nil {
			return nil, fmt.Errorf("credential %q: %w", n, err)
		}
		h.Set("Authorization", "Bearer "+val)
	}
	return &http.Client{Transport: refusalTransport{server: cfg.GetName(), sse: cfg.GetTransport() == raftstore.McpTransportSSE, log: g.log,
		base: limitTransport{server: cfg.GetName(), max: int64(g.cfg.MaxUpstreamMessageBytes),
			base: headerTransport{base: g.httpTransport, h: h, origin: originOf(cfg.GetUrl())}}}}, nil
}

// headerTransport adds h to the requests it carries to origin (scheme and
// host): not to where a redirect or an SSE endpoint event points.
type headerTransport struct {
	base   http.RoundTripper
	h      http.Header
	origin string
}

func originOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 && t.origin != "" && strings.ToLower(r.URL.Scheme+"://"+r.URL.Host) == t.origin {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header[k] = v
		}
	}
	return t.base.RoundTrip(r)
}
