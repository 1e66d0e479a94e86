package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/tollgate/tollgate/raftstore"
)

// Paths the gateway serves.
const (
	PathMCP      = "/mcp"
	PathMetadata = "/.well-known/oauth-protected-resource"
)

// statelessVersion is the first protocol version served without sessions
// (any node answers any request); older clients get sessions.
const statelessVersion = "2026-07-28"

// keyExtra is where the authenticated key travels in auth.TokenInfo.
const keyExtra = "tollgate.key"

func (g *Gateway) initHTTP() {
	getServer := func(r *http.Request) *sdk.Server { return g.server(scopeOf(r.URL.Path)) }
	g.stateful = sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		DisableLocalhostProtection: true, Logger: g.log, // idle sessions: sessions.go
	})
	g.stateless = sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		Stateless: true, PropagateRequestCancellation: true, DisableLocalhostProtection: true, Logger: g.log,
	})
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= statelessVersion {
			g.stateless.ServeHTTP(w, r)
			return
		}
		g.stateful.ServeHTTP(w, r)
	})
	g.authed = auth.RequireBearerToken(g.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(route)
}

// scopeOf returns the server a path names: "" for /mcp, NAME for /mcp/NAME.
func scopeOf(path string) string {
	return strings.Trim(strings.TrimPrefix(path, PathMCP), "/")
}

// ServeHTTP serves /mcp, /mcp/NAME and the protected-resource metadata.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, PathMetadata) {
		g.serveMetadata(w, r)
		return
	}
	if g.cfg.Ready != nil && !g.cfg.Ready() {
		w.Header().Set("Retry-After", "1")
		writeHTTPError(w, http.StatusServiceUnavailable, "This gateway node is starting and has not caught up with the cluster yet; retry in a moment (or through another node).")
		return
	}
	ti, err := g.verify(r.Context(), bearer(r), r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+baseURL(r)+PathMetadata+r.URL.Path+`"`)
		writeHTTPError(w, http.StatusUnauthorized, err.Error())
		return
	}
	// After the key check: without a key, no server's name is revealed.
	if scope := scopeOf(r.URL.Path); scope != "" && g.cfg.State.State().McpServer(scope) == nil {
		writeHTTPError(w, http.StatusNotFound, "No MCP server called "+scope+" is configured.")
		return
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		end := g.sessions.begin(sid, ti.UserID)
		if r.Method == http.MethodGet {
			end() // a client's open event stream does not keep its session from idling (nor does it in the SDK)
		} else {
			defer end()
		}
	}
	if g.serveFast(w, r, ti) {
		return
	}
	g.authed.ServeHTTP(w, r)
}

// verify authenticates a Tollgate key (auth.TokenVerifier).
func (g *Gateway) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	if token == "" {
		return nil, authError("Missing API key: send a Tollgate key as 'Authorization: Bearer <key>'.")
	}
	k := g.cfg.State.State().KeyByHash(raftstore.HashSecret(token))
	switch {
	case k == nil:
		return nil, authError("Invalid API key.")
	case k.Revoked:
		return nil, authError("This API key has been revoked.")
	case k.Expired(time.Now().UnixNano()):
		return nil, authError("This API key has expired.")
	}
	ti := &auth.TokenInfo{UserID: k.ID, Extra: map[string]any{keyExtra: k}}
	if k.ExpiresAt != 0 {
		ti.Expiration = time.Unix(0, k.ExpiresAt)
	}
	return ti, nil
}

type authErr struct{ msg string }

func (e authErr) Error() string { return e.msg }
func (e authErr) Unwrap() error { return auth.ErrInvalidToken }

func authError(msg string) error { return authErr{msg} }

// bearer returns the Authorization header's bearer token (the SDK's
// auth middleware reads that header only).
func bearer(r *http.Request) string {
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// serveMetadata serves the OAuth protected-resource metadata (RFC 9728)
// that MCP clients read to learn how to authenticate: a bearer token in
// the Authorization header (a Tollgate key; there is no authorization
// server to obtain one from).
func (g *Gateway) serveMetadata(w http.ResponseWriter, r *http.Request) {
	res := strings.TrimPrefix(r.URL.Path, PathMetadata)
	if res == "" || res == "/" {
		res = PathMCP
	}
	if res != PathMCP && !strings.HasPrefix(res, PathMCP+"/") {
		writeHTTPError(w, http.StatusNotFound, "No protected resource at "+res+".")
		return
	}
	meta := oauthex.ProtectedResourceMetadata{
		Resource:               baseURL(r) + res,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Tollgate MCP gateway",
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_ = json.NewEncoder(w).Encode(meta)
}

// baseURL is the scheme and host the client used.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

// writeHTTPError answers a request the MCP layer never saw, in the shape
// of a JSON-RPC error (what an MCP client parses).
func writeHTTPError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32001, "message": msg}})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
