package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"google.golang.org/grpc/codes"

	"github.com/tollgate/tollgate/node/admin"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// OIDCConfig configures single sign-on with an OpenID Connect provider.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (its discovery document is at
	// Issuer/.well-known/openid-configuration).
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is this console's callback, as registered with the
	// provider: https://HOST:PORT/api/oidc/callback.
	RedirectURL string
	// RoleClaim names the ID token claim holding the user's groups (a
	// list of strings, or one string); default "groups".
	RoleClaim string
	// Roles map groups to console roles; the first mapping (in this
	// order) whose group the user has applies. A user with none is
	// refused.
	Roles []RoleMapping
	// Scopes asked for; default openid, email, profile, groups.
	Scopes []string
	// HTTPClient talks to the provider; nil: http.DefaultClient.
	HTTPClient *http.Client
}

// RoleMapping gives the members of Group a role (and a team-admin its
// team).
type RoleMapping struct {
	Group, Role, TeamID string
}

// ParseRoleMap parses "group=role,...", where a team-admin's role is
// "team-admin:TEAMID".
func ParseRoleMap(s string) ([]RoleMapping, error) {
	var out []RoleMapping
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		group, role, ok := strings.Cut(item, "=")
		role, team, _ := strings.Cut(role, ":")
		m := RoleMapping{Group: strings.TrimSpace(group), Role: strings.TrimSpace(role), TeamID: strings.TrimSpace(team)}
		switch {
		case !ok || m.Group == "":
			return nil, fmt.Errorf("role map entry %q: want GROUP=ROLE", item)
		case !slices.Contains(raftstore.Roles, m.Role):
			return nil, fmt.Errorf("role map entry %q: role %q is not one of %s", item, m.Role, strings.Join(raftstore.Roles, ", "))
		case (m.Role == raftstore.RoleTeamAdmin) != (m.TeamID != ""):
			return nil, fmt.Errorf("role map entry %q: a team-admin needs its team (team-admin:TEAMID), other roles none", item)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, errors.New("the role map is empty: map at least one group to a role")
	}
	return out, nil
}

// oidcFlow runs the authorization code flow (with state, nonce and
// PKCE). The provider's discovery document is fetched on the first login,
// so a provider that is down does not keep the node from starting.
type oidcFlow struct {
	cfg OIDCConfig
	mu  sync.Mutex
	p   *oidc.Provider // nil until discovered
}

func newOIDCFlow(_ context.Context, cfg OIDCConfig) (*oidcFlow, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" || cfg.RedirectURL == "" || len(cfg.Roles) == 0 {
		return nil, errors.New("single sign-on needs an issuer, a client id, a redirect URL and a role map")
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = "groups"
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "email", "profile", "groups"}
	}
	return &oidcFlow{cfg: cfg}, nil
}

func (f *oidcFlow) ctx(ctx context.Context) context.Context {
	if f.cfg.HTTPClient != nil {
		return oidc.ClientContext(ctx, f.cfg.HTTPClient)
	}
	return ctx
}

func (f *oidcFlow) provider(ctx context.Context) (*oidc.Provider, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.p == nil {
		p, err := oidc.NewProvider(f.ctx(ctx), f.cfg.Issuer)
		if err != nil {
			return nil, fmt.Errorf("discover the identity provider %s: %w", f.cfg.Issuer, err)
		}
		f.p = p
	}
	return f.p, nil
}

func (f *oidcFlow) oauth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: f.cfg.ClientID, ClientSecret: f.cfg.ClientSecret, RedirectURL: f.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: f.cfg.Scopes}
}

// flowState is what the login keeps for the callback, in a signed cookie.
type flowState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Expires  int64  `json:"e"`
}

const (
	flowCookie = "tollgate_oidc"
	flowPath   = "/api/oidc/"
	flowLife   = 10 * time.Minute
)

func flowMAC(clusterSecret string, b []byte) []byte {
	k := hmac.New(sha256.New, []byte("tollgate console oidc flow\x00"))
	k.Write([]byte(clusterSecret))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write(b)
	return m.Sum(nil)
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) serveOIDCLogin(w http.ResponseWriter, r *http.Request) {
	f := s.oidc
	if f == nil {
		writeError(w, codes.NotFound, "single sign-on is not configured on this node")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	p, err := f.provider(ctx)
	if err != nil {
		s.log.Warn("single sign-on", "err", err)
		oidcPage(w, http.StatusBadGateway, "The identity provider cannot be reached", "Try again in a moment, or log in with a token.")
		return
	}
	cs := s.cfg.ClusterSecret()
	if cs == "" {
		oidcPage(w, http.StatusServiceUnavailable, "The cluster is starting", "Try again in a moment.")
		return
	}
	st := flowState{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(),
		Expires: s.now().Add(flowLife).Unix()}
	b, _ := json.Marshal(st)
	enc := base64.RawURLEncoding
	// Lax, not Strict: the provider's redirect back is a cross-site
	// navigation, which must bring this cookie.
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: enc.EncodeToString(b) + "." + enc.EncodeToString(flowMAC(cs, b)),
		Path: flowPath, MaxAge: int(flowLife / time.Second), HttpOnly: true, Secure: s.cfg.Secure, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, f.oauth(p).AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier)), http.StatusFound)
}

// flow returns the login's state from its cookie, if signed and fresh.
func (s *Server) flow(r *http.Request) (flowState, bool) {
	var st flowState
	c, err := r.Cookie(flowCookie)
	if err != nil {
		return st, false
	}
	body, mac, _ := strings.Cut(c.Value, ".")
	enc := base64.RawURLEncoding
	b, err1 := enc.DecodeString(body)
	m, err2 := enc.DecodeString(mac)
	if err1 != nil || err2 != nil || !hmac.Equal(m, flowMAC(s.cfg.ClusterSecret(), b)) || json.Unmarshal(b, &st) != nil {
		return st, false
	}
	return st, s.now().Unix() < st.Expires
}

func (s *Server) serveOIDCCallback(w http.ResponseWriter, r *http.Request) {
	f := s.oidc
	if f == nil {
		writeError(w, codes.NotFound, "single sign-on is not configured on this node")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Path: flowPath, MaxAge: -1, HttpOnly: true, Secure: s.cfg.Secure})
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		oidcPage(w, http.StatusUnauthorized, "The identity provider refused the login", e+": "+q.Get("error_description"))
		return
	}
	st, ok := s.flow(r)
	if !ok || !hmac.Equal([]byte(q.Get("state")), []byte(st.State)) {
		oidcPage(w, http.StatusBadRequest, "This login link is not valid", "It expired, was used already, or was not started here. Start again from the login page.")
		return
	}
	sess, err := f.identify(r.Context(), q.Get("code"), st)
	if err != nil {
		var refused *refusal
		if errors.As(err, &refused) {
			oidcPage(w, http.StatusForbidden, "No console role for this account", refused.Error())
			return
		}
		s.log.Warn("single sign-on", "err", err)
		oidcPage(w, http.StatusUnauthorized, "The login could not be verified", "Start again from the login page.")
		return
	}
	s.startSession(w, r, sess)
}

// refusal is a verified user that no group maps to a role.
type refusal struct{ user, claim string }

func (e *refusal) Error() string {
	return fmt.Sprintf("%s is signed in, but is in none of the groups (claim %q) that this cluster maps to a console role. "+
		"Ask an administrator to add the account to one of them, or log in with a token.", e.user, e.claim)
}

// identify redeems the code (with the PKCE verifier), verifies the ID
// token (signature, issuer, audience, expiry) and its nonce, and maps the
// user's groups to a role.
func (f *oidcFlow) identify(ctx context.Context, code string, st flowState) (*pb.ConsoleSession, error) {
	ctx, cancel := context.WithTimeout(f.ctx(ctx), 15*time.Second)
	defer cancel()
	p, err := f.provider(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := f.oauth(p).Exchange(ctx, code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		return nil, fmt.Errorf("redeem the code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: f.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("verify the ID token: %w", err)
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(st.Nonce)) {
		return nil, errors.New("the ID token's nonce is not this login's")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return nil, fmt.Errorf("read the ID token's claims: %w", err)
	}
	// Only an email the provider vouches for names the user (in sessions
	// and the audit log); otherwise anyone could claim another's address.
	user := admin.OIDCUserPrefix + idt.Subject
	if email, _ := claims["email"].(string); email != "" && claims["email_verified"] == true {
		user = admin.OIDCUserPrefix + email
	}
	groups := claimStrings(claims[f.cfg.RoleClaim])
	for _, m := range f.cfg.Roles {
		if slices.Contains(groups, m.Group) {
			return &pb.ConsoleSession{User: user, Role: m.Role, TeamId: m.TeamID, Oidc: true}, nil
		}
	}
	return nil, &refusal{user: user, claim: f.cfg.RoleClaim}
}

// claimStrings reads a claim that is a list of strings or one string.
func claimStrings(v any) []string {
	switch c := v.(type) {
	case string:
		return []string{c}
	case []any:
		var out []string
		for _, x := range c {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// oidcPage answers a browser with a short page (single sign-on happens
// in page navigations, not in the UI's fetches).
func oidcPage(w http.ResponseWriter, code int, title, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>Tollgate: %[1]s</title><h1>%[1]s</h1><p>%[2]s</p><p><a href=\"/\">Back to the console</a></p>\n",
		html.EscapeString(title), html.EscapeString(msg))
}
