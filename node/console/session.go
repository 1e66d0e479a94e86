package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/node/admin"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// sessionBody is what login and /api/session answer.
type sessionBody struct {
	User   string `json:"user"`
	Role   string `json:"role"`
	TeamID string `json:"team_id"`
	CSRF   string `json:"csrf"`
}

// csrfToken is the CSRF token of a session: an HMAC of the signed session
// under a key of its own derived from the cluster secret. A page of
// another origin can make the browser send the cookie, but cannot read
// the token that must go with it.
func csrfToken(clusterSecret, session string) string {
	k := hmac.New(sha256.New, []byte("tollgate console csrf\x00"))
	k.Write([]byte(clusterSecret))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// adminCtx returns the context of r's call to the admin service: the
// caller's session as the authorization, and the address r comes from,
// vouched for with the cluster secret, for the audit log (the session's
// own address is the one it logged in from).
func (s *Server) adminCtx(r *http.Request, session string) context.Context {
	md := metadata.Pairs("authorization", admin.ConsoleScheme+" "+session)
	cs := s.cfg.ClusterSecret()
	if sess, err := admin.OpenConsoleSession(cs, session, s.now()); err == nil {
		md = metadata.Join(md, admin.ActorMetadata(cs, &pb.Actor{User: sess.GetUser(), Address: r.RemoteAddr}))
	}
	return metadata.NewOutgoingContext(r.Context(), md)
}

// whoAmI asks the admin service who auth ("Bearer TOKEN" or "Console
// SESSION") is: the one place that decides.
func (s *Server) whoAmI(ctx context.Context, auth string) (*pb.WhoAmIResponse, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
	return pb.NewUserServiceClient(s.cfg.Admin).WhoAmI(ctx, &pb.WhoAmIRequest{})
}

func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	// Login is the one POST without a CSRF token. Requiring the JSON
	// content type keeps other origins out all the same: a form or a
	// no-cors fetch cannot send it, and a CORS preflight is never granted.
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		var b errorBody
		b.Error.Code, b.Error.Message = "UnsupportedMediaType", "the body must be JSON, sent with Content-Type: application/json"
		writeJSON(w, http.StatusUnsupportedMediaType, b)
		return
	}
	if !s.logins.allow(clientHost(r), s.now()) {
		writeError(w, codes.ResourceExhausted, "too many login attempts from this address; wait a minute")
		return
	}
	var req struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeStatus(w, err)
			return
		}
		writeError(w, codes.InvalidArgument, `the body must be {"token":"..."}`)
		return
	}
	if req.Token == "" {
		writeError(w, codes.InvalidArgument, "a token is required")
		return
	}
	who, err := s.whoAmI(r.Context(), "Bearer "+req.Token)
	if status.Code(err) == codes.Unauthenticated || (err == nil && who.GetUser() == raftstore.NodeUser) {
		// The cluster secret is the nodes' own, not a login.
		writeError(w, codes.Unauthenticated, "invalid token")
		return
	}
	if err != nil {
		writeStatus(w, err)
		return
	}
	sess := &pb.ConsoleSession{User: who.GetUser(), Role: who.GetRole(), TeamId: who.GetTeamId()}
	if who.GetUser() != raftstore.BootstrapUser {
		// Bound to this token: rotating it ends the session.
		sess.Nonce = admin.ConsoleTokenBinding(req.Token)
	}
	s.startSession(w, r, sess)
}

// startSession signs sess, sets it as the cookie and answers with it.
// A user gets at most the login limit of sessions a minute from this
// node, whatever the addresses: each one a logout can add to the
// replicated state until it expires.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, sess *pb.ConsoleSession) {
	now := s.now()
	if s.cfg.SessionsFull != nil && s.cfg.SessionsFull() {
		writeError(w, codes.ResourceExhausted, "the cluster holds the most logged-out console sessions it keeps, so new "+
			"console logins are refused until some of them expire (within "+sessionLife.String()+"); tokens still work with tollctl")
		return
	}
	if !s.users.allow(sess.GetUser(), now) {
		writeError(w, codes.ResourceExhausted, "too many logins of this user from this node; wait a minute")
		return
	}
	if !s.userLife.allow(sess.GetUser(), now) {
		writeError(w, codes.ResourceExhausted, "too many logins of this user from this node within "+
			userLifeWindow.String()+"; use a session you have, or tollctl with your token")
		return
	}
	sess.Address, sess.IssuedAt, sess.ExpiresAt = r.RemoteAddr, now.Unix(), now.Add(sessionLife).Unix()
	cs := s.cfg.ClusterSecret()
	signed, err := admin.SignConsoleSession(cs, sess)
	if err != nil {
		writeError(w, codes.Unavailable, err.Error())
		return
	}
	s.setCookie(w, signed, int(sessionLife/time.Second))
	if r.Method == http.MethodGet { // single sign-on's callback
		http.Redirect(w, r, "/", http.StatusFound)
		return
	}
	writeJSON(w, http.StatusOK, sessionBody{User: sess.GetUser(), Role: sess.GetRole(), TeamID: sess.GetTeamId(),
		CSRF: csrfToken(cs, signed)})
}

func (s *Server) setCookie(w http.ResponseWriter, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.cfg.Secure, SameSite: http.SameSiteStrictMode})
}

// serveSession answers who the session is, as the admin service sees it
// now (a revoked user's session is over).
func (s *Server) serveSession(w http.ResponseWriter, r *http.Request) {
	session, cs, ok := s.session(w, r)
	if !ok {
		return
	}
	who, err := s.whoAmI(r.Context(), admin.ConsoleScheme+" "+session)
	if err != nil {
		writeStatus(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionBody{User: who.GetUser(), Role: who.GetRole(), TeamID: who.GetTeamId(),
		CSRF: csrfToken(cs, session)})
}

// serveLogout ends the session on every node of the cluster (the admin
// service records it as ended until it expires, so a copy of the cookie
// is refused too) and clears the cookie. The cookie is cleared even when
// the session could not be ended on the server; the answer then says so.
//
// The leader waits a bounded time for every live node to apply the
// logout: a node that had not (it lags) still takes a copy of the cookie
// until it catches up, so the answer then names it rather than saying
// nothing (204).
func (s *Server) serveLogout(w http.ResponseWriter, r *http.Request, session string) {
	var hdr metadata.MD
	_, err := pb.NewUserServiceClient(s.cfg.Admin).EndConsoleSession(s.adminCtx(r, session), &pb.EndConsoleSessionRequest{},
		grpc.Header(&hdr))
	s.setCookie(w, "", -1)
	if err != nil {
		st := status.Convert(err)
		msg := st.Message()
		if st.Code() != codes.Unauthenticated { // else it is over already
			msg = "signed out in this browser, but the session could not be ended on the server, " +
				"so a copy of its cookie stays valid until it expires: " + msg
		}
		writeError(w, st.Code(), msg)
		return
	}
	if lag := admin.LaggingNodes(hdr); len(lag) > 0 {
		writeJSON(w, http.StatusOK, map[string]any{"lagging": lag, "message": "signed out, but node(s) " +
			strings.Join(lag, ", ") + " had not applied it yet: until they catch up, a copy of the cookie still opens there"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// session returns the request's signed session and the cluster secret,
// or answers 401 (or 503 before the cluster secret exists).
func (s *Server) session(w http.ResponseWriter, r *http.Request) (session, clusterSecret string, ok bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		writeError(w, codes.Unauthenticated, "not logged in")
		return "", "", false
	}
	cs := s.cfg.ClusterSecret()
	if _, err := admin.OpenConsoleSession(cs, c.Value, s.now()); err != nil {
		code := codes.Unauthenticated
		if errors.Is(err, admin.ErrNoClusterKey) {
			code = codes.Unavailable
		}
		writeError(w, code, err.Error())
		return "", "", false
	}
	return c.Value, cs, true
}

// withSession runs h with the request's session; with csrf, only when the
// request carries the session's CSRF token (X-CSRF-Token).
func (s *Server) withSession(csrf bool, h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		session, cs, ok := s.session(w, r)
		if !ok {
			return
		}
		if csrf && !hmac.Equal([]byte(r.Header.Get("X-CSRF-Token")), []byte(csrfToken(cs, session))) {
			writeError(w, codes.PermissionDenied, "missing or wrong X-CSRF-Token header (take it from /api/session)")
			return
		}
		h(w, r, session)
	}
}

// clientHost is the client's address without its port, for the login
// limit: an IPv6 address stands for its /64, which one host commonly holds
// whole (so it cannot take fresh addresses for fresh attempts).
func clientHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Is6() && !a.Is4In6() {
		return netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
	}
	return h
}

// rateLimit allows n events per window per address. It remembers at most
// maxTracked addresses; beyond, new addresses are refused until windows
// end (a flood of addresses must not open the door).
type rateLimit struct {
	mu     sync.Mutex
	n      int
	window time.Duration
	seen   map[string]*rateWindow
}

type rateWindow struct {
	start time.Time
	count int
}

const maxTracked = 10_000

func newRateLimit(n int, window time.Duration) *rateLimit {
	return &rateLimit{n: n, window: window, seen: map[string]*rateWindow{}}
}

func (l *rateLimit) allow(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	rw := l.seen[addr]
	if rw == nil || now.Sub(rw.start) >= l.window {
		if rw == nil && len(l.seen) >= maxTracked {
			for a, w := range l.seen {
				if now.Sub(w.start) >= l.window {
					delete(l.seen, a)
				}
			}
			if len(l.seen) >= maxTracked {
				return false
			}
		}
		rw = &rateWindow{start: now}
		l.seen[addr] = rw
	}
	rw.count++
	return rw.count <= l.n
}
