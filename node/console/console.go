// Package console serves Tollgate's web console: the static UI embedded
// from ui/, and a JSON API in front of the node's own admin gRPC service
// (login and sessions, an RPC bridge, a CSV export, single sign-on). It
// implements no admin rule itself: every call goes through the admin
// service's interceptors as the logged-in user (see DESIGN.md).
package console

import (
	"cmp"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/raftstore"
)

//go:embed ui
var uiFiles embed.FS

// SessionCookie names the session cookie.
const SessionCookie = "tollgate_session"

// sessionLife is how long a session lasts.
const sessionLife = 8 * time.Hour

// userLifeWindow is how long a login can put an entry in the cluster's
// ended sessions (by its logout): the session's life and the grace.
const userLifeWindow = sessionLife + raftstore.EndedSessionGrace

// maxBody bounds a request body.
const maxBody = 1 << 20

// Config configures a Server.
type Config struct {
	// NodeID is shown by /api/config.
	NodeID string
	// Admin is a connection to this node's admin gRPC server (in process):
	// every data call and every login check goes through it.
	Admin grpc.ClientConnInterface
	// ClusterSecret returns the replicated cluster secret ("" until it is
	// set), which sessions are signed under.
	ClusterSecret func() string
	// Secure marks cookies Secure (the console is served over TLS).
	Secure bool
	// OIDC turns on single sign-on; nil: off.
	OIDC *OIDCConfig
	// SessionsFull reports whether the cluster's set of ended sessions is
	// full (raftstore State.EndedConsoleSessionsFull): while it is, logins
	// are refused, since the leader would refuse their logouts. Nil: never.
	SessionsFull func() bool
	// LoginsPerMinute bounds login attempts per client address, and
	// logins per user (token or single sign-on); 0: 10.
	LoginsPerMinute int
	// LoginsPerSessionLife bounds one user's logins on this node within
	// a session's lifetime and the grace the cluster keeps an ended one
	// past it (userLifeWindow), so that one user's logouts hold at most
	// twice that many of the cluster's ended sessions per node, and a few
	// users cannot fill the set for everyone; 0: 60.
	LoginsPerSessionLife int
	// Logger; nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Server is the console's HTTP handler.
type Server struct {
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	logins   *rateLimit // by client address
	users    *rateLimit // logins by user
	userLife *rateLimit // logins by user over userLifeWindow
	oidc     *oidcFlow  // nil without single sign-on
	mux      *http.ServeMux
	ui       fs.FS
}

// New returns a Server. cfg.Admin and cfg.ClusterSecret must be set; an
// OIDC configuration is checked against its issuer (ctx bounds that).
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Admin == nil || cfg.ClusterSecret == nil {
		return nil, errors.New("console: Config.Admin and Config.ClusterSecret are required")
	}
	s := &Server{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	s.logins = newRateLimit(cmp.Or(cfg.LoginsPerMinute, 10), time.Minute)
	s.users = newRateLimit(cmp.Or(cfg.LoginsPerMinute, 10), time.Minute)
	s.userLife = newRateLimit(cmp.Or(cfg.LoginsPerSessionLife, 60), userLifeWindow)
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		return nil, err
	}
	s.ui = sub
	if cfg.OIDC != nil {
		if s.oidc, err = newOIDCFlow(ctx, *cfg.OIDC); err != nil {
			return nil, err
		}
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /api/config", s.serveConfig)
	m.HandleFunc("POST /api/login", s.serveLogin)
	m.HandleFunc("GET /api/session", s.serveSession)
	m.HandleFunc("POST /api/logout", s.withSession(true, s.serveLogout))
	m.HandleFunc("POST /api/rpc/{service}/{method}", s.withSession(true, s.serveRPC))
	m.HandleFunc("GET /api/spend.csv", s.withSession(false, s.serveSpendCSV))
	m.HandleFunc("GET /api/oidc/login", s.serveOIDCLogin)
	m.HandleFunc("GET /api/oidc/callback", s.serveOIDCCallback)
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, codes.NotFound, "no such console API: "+r.Method+" "+r.URL.Path)
	})
	m.HandleFunc("/", s.serveUI)
	s.mux = m
}

// ServeHTTP serves the console with its security headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		h.Set("Cache-Control", "no-store")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	s.mux.ServeHTTP(w, r)
}

func (s *Server) serveConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"oidc": s.oidc != nil, "node": s.cfg.NodeID})
}

// serveUI serves a file of ui/, or index.html for any other path (the
// UI's own routes).
func (s *Server) serveUI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	b, err := fs.ReadFile(s.ui, name)
	if name == "" || err != nil {
		name = "index.html"
		if b, err = fs.ReadFile(s.ui, name); err != nil {
			http.Error(w, "the console's UI is not built into this binary", http.StatusNotFound)
			return
		}
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	// no-cache with a validator: the browser asks again on every load and
	// gets a bodyless 304 while the binary's files are the same.
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", etag)
	for _, t := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		if t = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t), "W/")); t == etag || t == "*" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	_, _ = w.Write(b)
}

// errorBody is the JSON of every API error.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// httpStatus maps a gRPC code to the API's HTTP status.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.FailedPrecondition:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, c codes.Code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = c.String(), msg
	writeJSON(w, httpStatus(c), b)
}

// writeStatus writes err (a gRPC status, or a body too large) as an API
// error.
func writeStatus(w http.ResponseWriter, err error) {
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		var b errorBody
		b.Error.Code, b.Error.Message = "RequestTooLarge", "request body larger than 1 MiB"
		writeJSON(w, http.StatusRequestEntityTooLarge, b)
		return
	}
	st := status.Convert(err)
	writeError(w, st.Code(), st.Message())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
