package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// One single-node Raft store serves the whole package run; tests keep apart
// by using fresh key, route and credential names (see uniq).
var (
	storeOnce sync.Once
	store     *raftstore.Store
	storeErr  error
	storeDir  string
	nameSeq   atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if store != nil {
		_ = store.Close()
	}
	if storeDir != "" {
		_ = os.RemoveAll(storeDir)
	}
	os.Exit(code)
}

func testStore(tb testing.TB) *raftstore.Store {
	tb.Helper()
	storeOnce.Do(func() {
		storeDir, storeErr = os.MkdirTemp("", "tollgate-proxy-test-")
		if storeErr != nil {
			return
		}
		store, storeErr = raftstore.Open(raftstore.Config{
			Dir: storeDir, NodeID: "n1", BindAddr: "127.0.0.1:0", Bootstrap: true,
			Logger: slog.New(slog.DiscardHandler), LogLevel: "error",
			HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		})
		if storeErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		storeErr = store.WaitReady(ctx)
	})
	if storeErr != nil {
		tb.Fatalf("raft store: %v", storeErr)
	}
	return store
}

func apply(tb testing.TB, cmds ...*pb.Command) {
	tb.Helper()
	s := testStore(tb)
	for _, c := range cmds {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.Apply(ctx, c)
		cancel()
		if err != nil {
			tb.Fatalf("apply %v: %v", c, err)
		}
	}
}

// uniq returns a name no other test uses.
func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1)) }

// newKey creates a key allowed to use models (all when none) and returns its
// id and secret.
func newKey(tb testing.TB, models ...string) (id, secret string) {
	tb.Helper()
	id = uniq("key")
	secret = "sk-tg-" + id + "-secret"
	h := raftstore.HashSecret(secret)
	apply(tb, &pb.Command{Op: &pb.Command_CreateKey{CreateKey: &pb.CreateKeyCommand{Key: &pb.StoredKey{
		Key:        &pb.Key{Id: id, Name: "test " + id, Models: models},
		SecretHash: h[:],
	}}}})
	return id, secret
}

func revokeKey(tb testing.TB, id string) {
	tb.Helper()
	apply(tb, &pb.Command{Op: &pb.Command_RevokeKey{RevokeKey: &pb.RevokeKeyCommand{Id: id}}})
}

func setKeyExpiry(tb testing.TB, id string, at time.Time) {
	tb.Helper()
	apply(tb, &pb.Command{Op: &pb.Command_UpdateKey{UpdateKey: &pb.UpdateKeyCommand{
		Update: &pb.UpdateKeyRequest{Id: id, ExpiresAt: timestamppb.New(at)},
	}}})
}

func setCredential(tb testing.TB, name, value string) {
	tb.Helper()
	apply(tb, &pb.Command{Op: &pb.Command_SetCredential{SetCredential: &pb.SetCredentialCommand{Name: name, Value: value}}})
}

// newRoute creates a route (named uniquely from prefix) with deps.
func newRoute(tb testing.TB, prefix string, deps ...*pb.Deployment) string {
	tb.Helper()
	name := uniq(prefix)
	addDeployments(tb, name, deps...)
	return name
}

// addDeployments adds deps to the route called name, creating it.
func addDeployments(tb testing.TB, name string, deps ...*pb.Deployment) {
	tb.Helper()
	for _, d := range deps {
		apply(tb, &pb.Command{Op: &pb.Command_AddDeployment{AddDeployment: &pb.AddDeploymentCommand{Route: name, Deployment: d}}})
	}
}

// dep is an openai-compatible deployment of baseURL (an httptest server URL;
// "/v1" is appended).
func dep(id, baseURL, upstreamModel string) *pb.Deployment {
	return &pb.Deployment{Id: id, Provider: routing.ProviderOpenAICompatible, BaseUrl: baseURL + "/v1",
		UpstreamModel: upstreamModel}
}

// startMock serves a mockllm on a real listener.
func startMock(tb testing.TB, o mock.Options) (*mock.Server, string) {
	tb.Helper()
	ms := mock.New(o)
	srv := httptest.NewServer(ms)
	tb.Cleanup(srv.Close)
	return ms, srv.URL
}

// closedURL returns the URL of a port nothing listens on.
func closedURL(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

// recorder hands the handler's records to the test (one consumer).
type recorder struct {
	ch      chan proxy.Record
	stashed []proxy.Record
}

func (r *recorder) Record(rec *proxy.Record) {
	select {
	case r.ch <- *rec:
	default: // Record must not block
	}
}

// wait returns the record of the request with the given X-Request-Id,
// waiting for it to finish.
func (r *recorder) wait(tb testing.TB, requestID string) proxy.Record {
	tb.Helper()
	for i, rec := range r.stashed {
		if rec.RequestID == requestID {
			r.stashed = append(r.stashed[:i], r.stashed[i+1:]...)
			return rec
		}
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case rec := <-r.ch:
			if rec.RequestID == requestID {
				return rec
			}
			r.stashed = append(r.stashed, rec)
		case <-timeout:
			tb.Fatalf("timed out waiting for the Record of request %q", requestID)
			return proxy.Record{}
		}
	}
}

// next returns the next record in finishing order.
func (r *recorder) next(tb testing.TB) proxy.Record {
	tb.Helper()
	if len(r.stashed) > 0 {
		rec := r.stashed[0]
		r.stashed = r.stashed[1:]
		return rec
	}
	select {
	case rec := <-r.ch:
		return rec
	case <-time.After(10 * time.Second):
		tb.Fatal("timed out waiting for a Record")
		return proxy.Record{}
	}
}

// of returns the record of the request that got response r.
func (r *recorder) of(tb testing.TB, resp response) proxy.Record {
	tb.Helper()
	id := resp.header.Get("X-Request-Id")
	if id == "" {
		tb.Fatalf("response without X-Request-Id (status %d)", resp.status)
	}
	return r.wait(tb, id)
}

type gateway struct {
	URL    string
	rec    *recorder
	client *http.Client
	h      *proxy.Handler
}

// startGateway serves a proxy.Handler over the shared store on a real
// listener; cfg.State defaults to the store and a recorder is appended.
func startGateway(tb testing.TB, cfg proxy.Config) *gateway {
	tb.Helper()
	if cfg.State == nil {
		cfg.State = testStore(tb)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Transport == nil {
		tr := proxy.NewTransport()
		tb.Cleanup(tr.CloseIdleConnections)
		cfg.Transport = tr
	}
	rec := &recorder{ch: make(chan proxy.Record, 1024)}
	cfg.Recorders = append(cfg.Recorders, rec)
	h := proxy.New(cfg)
	srv := httptest.NewUnstartedServer(h)
	// A panicking handler is recovered by net/http, which logs it and drops
	// the connection: fail the test on it.
	errLog := &syncBuffer{}
	srv.Config.ErrorLog = log.New(errLog, "", 0)
	srv.Start()
	tb.Cleanup(func() {
		srv.Close()
		if l := errLog.String(); strings.Contains(l, "panic") {
			tb.Errorf("the gateway's handler panicked:\n%s", firstLines(l, 12))
		}
	})
	return &gateway{URL: srv.URL, rec: rec, client: srv.Client(), h: h}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}

// response is a finished response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (g *gateway) do(tb testing.TB, method, path, secret, body string, hdr ...string) response {
	tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.URL+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return g.send(tb, req)
}

func (g *gateway) send(tb testing.TB, req *http.Request) response {
	tb.Helper()
	resp, err := g.client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func (g *gateway) post(tb testing.TB, path, secret, body string) response {
	tb.Helper()
	return g.do(tb, http.MethodPost, path, secret, body)
}

// apiErr is OpenAI's error body.
type apiErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// wantError checks r is an OpenAI-shaped error with the given status, type
// and code, and returns it.
func wantError(tb testing.TB, r response, status int, typ, code string) apiErr {
	tb.Helper()
	if r.status != status {
		tb.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("Content-Type %q", ct)
	}
	var members map[string]map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &members); err != nil {
		tb.Fatalf("error body %s: %v", r.body, err)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := members["error"][k]; !ok {
			tb.Errorf("error body %s lacks error.%s", r.body, k)
		}
	}
	var e apiErr
	_ = json.Unmarshal(r.body, &e)
	if e.Error.Type != typ {
		tb.Errorf("error type %q, want %q (body %s)", e.Error.Type, typ, r.body)
	}
	if got := deref(e.Error.Code); got != code {
		tb.Errorf("error code %q, want %q (body %s)", got, code, r.body)
	}
	if e.Error.Message == "" {
		tb.Errorf("empty error message")
	}
	return e
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// sseReader reads a server-sent event stream one event at a time.
type sseReader struct{ br *bufio.Reader }

// next returns the data lines of the next event joined by "\n", or io.EOF.
func (s *sseReader) next() (string, error) {
	var data []string
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && data == nil {
				return "", io.EOF
			}
			if err == io.EOF {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if data == nil {
				continue
			}
			return strings.Join(data, "\n"), nil
		}
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
		} else {
			data = append(data, "<non-data line "+line+">")
		}
	}
}

// all reads the remaining events.
func (s *sseReader) all() ([]string, error) {
	var out []string
	for {
		ev, err := s.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// openStream posts body and returns the open streaming response.
func (g *gateway) openStream(tb testing.TB, ctx context.Context, path, secret, body string) (*http.Response, *sseReader) {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := g.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp, &sseReader{bufio.NewReader(resp.Body)}
}

// chatBody is a chat request for model with extra members (JSON text
// without braces) appended.
func chatBody(model string, extra ...string) string {
	b, _ := json.Marshal(model)
	s := `{"model":` + string(b) + `,"messages":[{"role":"user","content":"Hello there, gateway!"}]`
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

// chatPromptTokens is the mock's prompt token count for chatBody.
var chatPromptTokens = int64((len("Hello there, gateway!") + 3) / 4)
