package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

const testToken = "test-admin-token"

var fakeTime = timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

// fake is an in-memory admin API served by a real gRPC server.
type fake struct {
	addr    string
	keys    *fakeKeys
	models  *fakeModels
	creds   *fakeCreds
	cluster *fakeCluster
	teams   *fakeTeams
	spend   *fakeSpend
	inject  *injector
}

func startFake(t *testing.T) *fake {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveFake(t, lis)
}

// serveFake serves a new fake on lis until the test ends.
func serveFake(t *testing.T, lis net.Listener) *fake {
	t.Helper()
	statuses := &fakeStatuses{m: map[string]*tollgatev1.BudgetStatus{}}
	keys := &fakeKeys{secrets: map[string]string{}, statuses: statuses}
	f := &fake{
		addr:    lis.Addr().String(),
		keys:    keys,
		teams:   &fakeTeams{keys: keys, statuses: statuses},
		spend:   &fakeSpend{},
		models:  &fakeModels{routes: map[string]*tollgatev1.ModelRoute{}},
		creds:   &fakeCreds{values: map[string]string{}},
		cluster: newFakeCluster(),
		inject:  &injector{calls: map[string]int{}, next: map[string][]error{}, always: map[string]error{}},
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(checkToken, f.inject.intercept),
		grpc.MaxRecvMsgSize(256<<20), grpc.MaxSendMsgSize(256<<20), // as tollgate's
	)
	tollgatev1.RegisterKeyServiceServer(srv, f.keys)
	tollgatev1.RegisterModelServiceServer(srv, f.models)
	tollgatev1.RegisterCredentialServiceServer(srv, f.creds)
	tollgatev1.RegisterClusterServiceServer(srv, f.cluster)
	tollgatev1.RegisterTeamServiceServer(srv, f.teams)
	tollgatev1.RegisterSpendServiceServer(srv, f.spend)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f
}

// injector makes chosen RPCs fail or report lagging nodes, and counts the
// calls that passed authentication. Methods are full gRPC method names.
type injector struct {
	mu      sync.Mutex
	calls   map[string]int
	next    map[string][]error    // errors for the next calls, in order
	always  map[string]error      // error for every later call
	lagging string                // x-tollgate-lagging header on successful calls
	seen    map[string][]seenCall // every call's request id and request, by method
}

// seenCall is what one call sent.
type seenCall struct {
	requestID string
	req       proto.Message
}

// calls returns what the calls of method sent, in order.
func (in *injector) seenCalls(method string) []seenCall {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]seenCall(nil), in.seen[method]...)
}

// failNext makes the next len(errs) calls of method fail with errs.
func (in *injector) failNext(method string, errs ...error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.next[method] = append(in.next[method], errs...)
}

// failAlways makes every call of method fail with err.
func (in *injector) failAlways(method string, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.always[method] = err
}

// setLagging makes successful calls name nodes in the lagging header.
func (in *injector) setLagging(nodes string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.lagging = nodes
}

// count returns how many calls of method the server received.
func (in *injector) count(method string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.calls[method]
}

func (in *injector) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	in.mu.Lock()
	m := info.FullMethod
	in.calls[m]++
	if pm, ok := req.(proto.Message); ok {
		md, _ := metadata.FromIncomingContext(ctx)
		if in.seen == nil {
			in.seen = map[string][]seenCall{}
		}
		in.seen[m] = append(in.seen[m], seenCall{strings.Join(md.Get("x-tollgate-request-id"), ","), proto.Clone(pm)})
	}
	err := in.always[m]
	if q := in.next[m]; len(q) > 0 {
		err, in.next[m] = q[0], q[1:]
	}
	lagging := in.lagging
	in.mu.Unlock()
	if err != nil {
		return nil, err
	}
	resp, err := h(ctx, req)
	if err == nil && lagging != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-tollgate-lagging", lagging))
	}
	return resp, err
}

func checkToken(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+testToken {
		return nil, status.Error(codes.Unauthenticated, "invalid or missing admin token")
	}
	return h(ctx, req)
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs tollctl in-process.
func runCLI(stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// run runs tollctl against the fake with the right token.
func (f *fake) run(t *testing.T, args ...string) result {
	t.Helper()
	return f.runStdin(t, "", args...)
}

func (f *fake) runStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	full := append([]string{"--addr", f.addr, "--token", testToken, "--timeout", "5s"}, args...)
	return runCLI(stdin, full...)
}

// mustRun fails the test unless the command exits 0.
func (f *fake) mustRun(t *testing.T, args ...string) result {
	t.Helper()
	r := f.run(t, args...)
	if r.code != 0 {
		t.Fatalf("tollctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// ---- KeyService ----

type fakeKeys struct {
	tollgatev1.UnimplementedKeyServiceServer
	mu         sync.Mutex
	keys       []*tollgatev1.Key
	secrets    map[string]string
	n          int
	lastCreate *tollgatev1.CreateKeyRequest
	lastUpdate *tollgatev1.UpdateKeyRequest
	listCalls  []*tollgatev1.ListKeysRequest
	statuses   *fakeStatuses
}

func (s *fakeKeys) newSecret(id string) string {
	s.n++
	secret := fmt.Sprintf("tg_%04d_%s", s.n, strings.Repeat("s", 24))
	s.secrets[id] = secret
	return secret
}

func (s *fakeKeys) find(id string) (*tollgatev1.Key, error) {
	for _, k := range s.keys {
		if k.Id == id {
			return k, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "key %s not found", id)
}

// add stores a key directly, bypassing the API.
func (s *fakeKeys) add(k *tollgatev1.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, k)
}

func (s *fakeKeys) CreateKey(_ context.Context, req *tollgatev1.CreateKeyRequest) (*tollgatev1.CreateKeyResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastCreate = proto.Clone(req).(*tollgatev1.CreateKeyRequest)
	if req.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	id := fmt.Sprintf("key_%04x", len(s.keys)+1)
	secret := s.newSecret(id)
	k := &tollgatev1.Key{
		Id: id, Name: req.Name, SecretPrefix: secret[:8], Models: req.Models,
		CreatedAt: fakeTime, UpdatedAt: fakeTime, ExpiresAt: req.ExpiresAt, Metadata: req.Metadata,
		TeamId: req.TeamId, Budget: req.Budget, Limits: storedLimits(req.Limits),
	}
	s.keys = append(s.keys, k)
	return &tollgatev1.CreateKeyResponse{Key: proto.Clone(k).(*tollgatev1.Key), Secret: secret}, nil
}

func (s *fakeKeys) ListKeys(_ context.Context, req *tollgatev1.ListKeysRequest) (*tollgatev1.ListKeysResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listCalls = append(s.listCalls, proto.Clone(req).(*tollgatev1.ListKeysRequest))
	resp := &tollgatev1.ListKeysResponse{}
	for _, k := range s.keys {
		if k.RevokedAt == nil || req.IncludeRevoked {
			resp.Keys = append(resp.Keys, proto.Clone(k).(*tollgatev1.Key))
		}
	}
	if req.PageSize == 0 {
		return resp, nil
	}
	// Pages sorted by id, the token the previous page's last id, as the
	// node answers (node/admin/keyspage.go).
	slices.SortFunc(resp.Keys, func(a, b *tollgatev1.Key) int { return strings.Compare(a.Id, b.Id) })
	resp.Total = uint32(len(resp.Keys))
	i := 0
	for i < len(resp.Keys) && req.PageToken != "" && resp.Keys[i].Id <= req.PageToken {
		i++
	}
	resp.Keys = resp.Keys[i:]
	if len(resp.Keys) > int(req.PageSize) {
		resp.Keys = resp.Keys[:req.PageSize]
		resp.NextPageToken = resp.Keys[len(resp.Keys)-1].Id
	}
	return resp, nil
}

func (s *fakeKeys) GetKey(_ context.Context, req *tollgatev1.GetKeyRequest) (*tollgatev1.GetKeyResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.find(req.Id)
	if err != nil {
		return nil, err
	}
	resp := &tollgatev1.GetKeyResponse{Key: proto.Clone(k).(*tollgatev1.Key)}
	if k.Budget != nil {
		resp.BudgetStatus = s.statuses.get("key:" + k.Id)
	}
	if k.TeamId != "" {
		resp.TeamBudgetStatus = s.statuses.get("team:" + k.TeamId)
	}
	return resp, nil
}

func (s *fakeKeys) UpdateKey(_ context.Context, req *tollgatev1.UpdateKeyRequest) (*tollgatev1.UpdateKeyResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUpdate = proto.Clone(req).(*tollgatev1.UpdateKeyRequest)
	k, err := s.find(req.Id)
	if err != nil {
		return nil, err
	}
	if req.Name != nil {
		k.Name = *req.Name
	}
	if req.Models != nil {
		k.Models = req.Models.Values
	}
	if req.ExpiresAt != nil {
		k.ExpiresAt = req.ExpiresAt
	}
	if req.ClearExpiresAt {
		k.ExpiresAt = nil
	}
	if req.TeamId != nil {
		k.TeamId = *req.TeamId
	}
	if req.Budget != nil {
		k.Budget = req.Budget
	}
	if req.ClearBudget {
		k.Budget = nil
	}
	if req.Limits != nil {
		k.Limits = storedLimits(req.Limits)
	}
	for name, v := range req.Metadata {
		if k.Metadata == nil {
			k.Metadata = map[string]string{}
		}
		if v == "" {
			delete(k.Metadata, name)
		} else {
			k.Metadata[name] = v
		}
	}
	return &tollgatev1.UpdateKeyResponse{Key: proto.Clone(k).(*tollgatev1.Key)}, nil
}

func (s *fakeKeys) RevokeKey(_ context.Context, req *tollgatev1.RevokeKeyRequest) (*tollgatev1.RevokeKeyResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.find(req.Id)
	if err != nil {
		return nil, err
	}
	k.RevokedAt = fakeTime
	return &tollgatev1.RevokeKeyResponse{Key: proto.Clone(k).(*tollgatev1.Key)}, nil
}

func (s *fakeKeys) RotateKey(_ context.Context, req *tollgatev1.RotateKeyRequest) (*tollgatev1.RotateKeyResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.find(req.Id)
	if err != nil {
		return nil, err
	}
	secret := s.newSecret(k.Id)
	k.SecretPrefix = secret[:8]
	return &tollgatev1.RotateKeyResponse{Key: proto.Clone(k).(*tollgatev1.Key), Secret: secret}, nil
}

// ---- ModelService ----

type fakeModels struct {
	tollgatev1.UnimplementedModelServiceServer
	mu            sync.Mutex
	routes        map[string]*tollgatev1.ModelRoute
	lastAdd       *tollgatev1.AddDeploymentRequest
	lastUpdate    *tollgatev1.UpdateDeploymentRequest
	lastRouteOpts *tollgatev1.SetRouteOptionsRequest
	lastTest      *tollgatev1.TestModelRequest
	testResp      *tollgatev1.TestModelResponse // nil: a 200 from the first deployment
	calls         []string
}

func (s *fakeModels) route(name string) (*tollgatev1.ModelRoute, error) {
	if r, ok := s.routes[name]; ok {
		return r, nil
	}
	return nil, status.Errorf(codes.NotFound, "model %s not found", name)
}

func (s *fakeModels) deployment(model, id string) (*tollgatev1.ModelRoute, int, error) {
	r, err := s.route(model)
	if err != nil {
		return nil, 0, err
	}
	i := slices.IndexFunc(r.Deployments, func(d *tollgatev1.Deployment) bool { return d.Id == id })
	if i < 0 {
		return nil, 0, status.Errorf(codes.NotFound, "model %s has no deployment %s", model, id)
	}
	return r, i, nil
}

func (s *fakeModels) called(name string) {
	s.calls = append(s.calls, name)
}

func cloneRoute(r *tollgatev1.ModelRoute) *tollgatev1.ModelRoute {
	return proto.Clone(r).(*tollgatev1.ModelRoute)
}

func (s *fakeModels) AddDeployment(_ context.Context, req *tollgatev1.AddDeploymentRequest) (*tollgatev1.AddDeploymentResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("AddDeployment")
	s.lastAdd = proto.Clone(req).(*tollgatev1.AddDeploymentRequest)
	d := proto.Clone(req.GetDeployment()).(*tollgatev1.Deployment)
	if req.Model == "" || d.GetId() == "" {
		return nil, status.Error(codes.InvalidArgument, "model and deployment id are required")
	}
	// As the real server: defaults, presets and options are checked by
	// routing.NormalizeDeployment.
	if err := routing.NormalizeDeployment(d); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "model %q, deployment %q: %v", req.Model, d.Id, err)
	}
	r, ok := s.routes[req.Model]
	if !ok {
		r = &tollgatev1.ModelRoute{Name: req.Model, CreatedAt: fakeTime, UpdatedAt: fakeTime}
		s.routes[req.Model] = r
	}
	if slices.ContainsFunc(r.Deployments, func(x *tollgatev1.Deployment) bool { return x.Id == d.Id }) {
		return nil, status.Errorf(codes.AlreadyExists, "deployment %s already exists in model %s", d.Id, req.Model)
	}
	r.Deployments = append(r.Deployments, d)
	return &tollgatev1.AddDeploymentResponse{Route: cloneRoute(r)}, nil
}

func (s *fakeModels) UpdateDeployment(_ context.Context, req *tollgatev1.UpdateDeploymentRequest) (*tollgatev1.UpdateDeploymentResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("UpdateDeployment")
	s.lastUpdate = proto.Clone(req).(*tollgatev1.UpdateDeploymentRequest)
	r, i, err := s.deployment(req.Model, req.DeploymentId)
	if err != nil {
		return nil, err
	}
	d := proto.Clone(r.Deployments[i]).(*tollgatev1.Deployment)
	if req.Provider != nil {
		d.Provider = *req.Provider
	}
	if req.BaseUrl != nil {
		d.BaseUrl = *req.BaseUrl
	}
	if req.UpstreamModel != nil {
		d.UpstreamModel = *req.UpstreamModel
	}
	if req.Credential != nil {
		d.Credential = *req.Credential
	}
	if req.Weight != nil {
		d.Weight = *req.Weight
	}
	if req.Priority != nil {
		d.Priority = *req.Priority
	}
	if req.TimeoutMs != nil {
		d.TimeoutMs = *req.TimeoutMs
	}
	if req.FirstTokenTimeoutMs != nil {
		d.FirstTokenTimeoutMs = *req.FirstTokenTimeoutMs
	}
	if req.SetOptions {
		d.Options = maps.Clone(req.Options)
	}
	if req.Limits != nil {
		d.Limits = storedLimits(req.Limits)
	}
	if err := routing.NormalizeDeployment(d); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "model %q, deployment %q: %v", req.Model, d.Id, err)
	}
	r.Deployments[i] = d
	return &tollgatev1.UpdateDeploymentResponse{Route: cloneRoute(r)}, nil
}

// fakeStrategies are the routing strategies the fake accepts.
var fakeStrategies = []string{"weighted", "least-inflight", "latency", "cost"}

func (s *fakeModels) SetRouteOptions(_ context.Context, req *tollgatev1.SetRouteOptionsRequest) (*tollgatev1.SetRouteOptionsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("SetRouteOptions")
	s.lastRouteOpts = proto.Clone(req).(*tollgatev1.SetRouteOptionsRequest)
	r, err := s.route(req.Model)
	if err != nil {
		return nil, err
	}
	o := req.GetOptions()
	if st := o.GetStrategy(); st != "" && !slices.Contains(fakeStrategies, st) {
		return nil, status.Errorf(codes.InvalidArgument, "unknown strategy %q; one of %s", st, strings.Join(fakeStrategies, ", "))
	}
	for _, f := range slices.Concat(o.GetFallbacks(), o.GetContextFallbacks()) {
		if _, ok := s.routes[f]; !ok {
			return nil, status.Errorf(codes.FailedPrecondition, "fallback model %q does not exist; add it first", f)
		}
	}
	if o.GetMaxAttempts() > 10 {
		return nil, status.Errorf(codes.InvalidArgument, "max attempts %d: at most 10", o.GetMaxAttempts())
	}
	r.Options = proto.Clone(o).(*tollgatev1.RouteOptions)
	if proto.Equal(r.Options, &tollgatev1.RouteOptions{}) {
		r.Options = nil
	}
	return &tollgatev1.SetRouteOptionsResponse{Route: cloneRoute(r)}, nil
}

func (s *fakeModels) TestModel(_ context.Context, req *tollgatev1.TestModelRequest) (*tollgatev1.TestModelResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("TestModel")
	s.lastTest = proto.Clone(req).(*tollgatev1.TestModelRequest)
	r, err := s.route(req.Model)
	if err != nil {
		return nil, err
	}
	if s.testResp != nil {
		return proto.Clone(s.testResp).(*tollgatev1.TestModelResponse), nil
	}
	d := r.GetDeployments()[0]
	return &tollgatev1.TestModelResponse{Status: 200, Route: r.Name, Deployment: d.Id, Provider: d.Provider,
		Attempts: 1, LatencyMs: 412, Reply: "Hello! How can I help?", PromptTokens: 9, CompletionTokens: 12}, nil
}

// setTestResponse makes TestModel answer resp.
func (s *fakeModels) setTestResponse(resp *tollgatev1.TestModelResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.testResp = resp
}

// lastRequests returns the last AddDeployment, SetRouteOptions and
// TestModel requests the server received.
func (s *fakeModels) lastRequests() (*tollgatev1.AddDeploymentRequest, *tollgatev1.SetRouteOptionsRequest, *tollgatev1.TestModelRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAdd, s.lastRouteOpts, s.lastTest
}

func (s *fakeModels) RemoveDeployment(_ context.Context, req *tollgatev1.RemoveDeploymentRequest) (*tollgatev1.RemoveDeploymentResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("RemoveDeployment")
	r, i, err := s.deployment(req.Model, req.DeploymentId)
	if err != nil {
		return nil, err
	}
	r.Deployments = slices.Delete(r.Deployments, i, i+1)
	if len(r.Deployments) == 0 {
		delete(s.routes, req.Model)
		return &tollgatev1.RemoveDeploymentResponse{}, nil
	}
	return &tollgatev1.RemoveDeploymentResponse{Route: cloneRoute(r)}, nil
}

func (s *fakeModels) DeleteModel(_ context.Context, req *tollgatev1.DeleteModelRequest) (*tollgatev1.DeleteModelResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("DeleteModel")
	if _, err := s.route(req.Model); err != nil {
		return nil, err
	}
	delete(s.routes, req.Model)
	return &tollgatev1.DeleteModelResponse{}, nil
}

func (s *fakeModels) ListModels(context.Context, *tollgatev1.ListModelsRequest) (*tollgatev1.ListModelsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("ListModels")
	resp := &tollgatev1.ListModelsResponse{}
	for _, name := range slices.Sorted(maps.Keys(s.routes)) {
		resp.Routes = append(resp.Routes, cloneRoute(s.routes[name]))
	}
	return resp, nil
}

func (s *fakeModels) GetModel(_ context.Context, req *tollgatev1.GetModelRequest) (*tollgatev1.GetModelResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("GetModel")
	r, err := s.route(req.Model)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.GetModelResponse{Route: cloneRoute(r)}, nil
}

// get returns a copy of a route, or nil.
func (s *fakeModels) get(name string) *tollgatev1.ModelRoute {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.routes[name]; ok {
		return cloneRoute(r)
	}
	return nil
}

// ---- CredentialService ----

type fakeCreds struct {
	tollgatev1.UnimplementedCredentialServiceServer
	mu     sync.Mutex
	values map[string]string
}

func (s *fakeCreds) credential(name string) *tollgatev1.Credential {
	v := s.values[name]
	return &tollgatev1.Credential{Name: name, Hint: v[max(0, len(v)-4):], UpdatedAt: fakeTime}
}

func (s *fakeCreds) SetCredential(_ context.Context, req *tollgatev1.SetCredentialRequest) (*tollgatev1.SetCredentialResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.Name == "" || req.Value == "" {
		return nil, status.Error(codes.InvalidArgument, "name and value are required")
	}
	s.values[req.Name] = req.Value
	return &tollgatev1.SetCredentialResponse{Credential: s.credential(req.Name)}, nil
}

func (s *fakeCreds) ListCredentials(context.Context, *tollgatev1.ListCredentialsRequest) (*tollgatev1.ListCredentialsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &tollgatev1.ListCredentialsResponse{}
	for _, name := range slices.Sorted(maps.Keys(s.values)) {
		resp.Credentials = append(resp.Credentials, s.credential(name))
	}
	return resp, nil
}

func (s *fakeCreds) DeleteCredential(_ context.Context, req *tollgatev1.DeleteCredentialRequest) (*tollgatev1.DeleteCredentialResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[req.Name]; !ok {
		return nil, status.Errorf(codes.NotFound, "credential %s not found", req.Name)
	}
	delete(s.values, req.Name)
	return &tollgatev1.DeleteCredentialResponse{}, nil
}

// value returns what the server stored for a credential.
func (s *fakeCreds) value(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[name]
	return v, ok
}

// lastUpdateReq returns the last UpdateKey request the server received.
func (s *fakeKeys) lastUpdateReq() *tollgatev1.UpdateKeyRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUpdate
}

// key returns a copy of a stored key, or nil.
func (s *fakeKeys) key(id string) *tollgatev1.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.find(id)
	if err != nil {
		return nil
	}
	return proto.Clone(k).(*tollgatev1.Key)
}

// lastUpdateReq returns the last UpdateDeployment request the server received.
func (s *fakeModels) lastUpdateReq() *tollgatev1.UpdateDeploymentRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUpdate
}

// takeCalls returns and clears the RPC names received so far.
func (s *fakeModels) takeCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

// secret returns the current secret of a key.
func (s *fakeKeys) secret(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.secrets[id]
}

// ---- ClusterService ----

type fakeCluster struct {
	tollgatev1.UnimplementedClusterServiceServer
	mu       sync.Mutex
	status   *tollgatev1.StatusResponse
	snapshot []byte
	index    uint64
	restored []byte
	removed  []string
}

// newFakeCluster answers as n1, the leader of a three-node cluster in
// which n3 is unreachable, with n4 known to gossip but not to Raft.
func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		status: &tollgatev1.StatusResponse{
			Node: "n1", Leader: "n1", Term: 7, AppliedIndex: 42, CommitIndex: 43, LastIndex: 44, RaftState: "leader",
			Members: []*tollgatev1.Member{
				{Id: "n1", Role: "voter", Leader: true, GossipState: "alive", Health: "healthy",
					RaftAddress: "10.0.0.1:4300", GossipAddress: "10.0.0.1:4400", HttpAddress: "10.0.0.1:4000", AdminAddress: "10.0.0.1:4100", Version: "v1.2.0"},
				{Id: "n2", Role: "voter", GossipState: "alive", Health: "healthy",
					RaftAddress: "10.0.0.2:4300", GossipAddress: "10.0.0.2:4400", HttpAddress: "10.0.0.2:4000", AdminAddress: "10.0.0.2:4100"},
				{Id: "n3", Role: "nonvoter", GossipState: "unknown", Health: "unreachable", RaftAddress: "10.0.0.3:4300"},
				{Id: "n4", Role: "none", GossipState: "alive", Health: "not in raft",
					GossipAddress: "10.0.0.4:4400", HttpAddress: "10.0.0.4:4000", AdminAddress: "10.0.0.4:4100"},
			},
		},
		snapshot: []byte("\x0a\x03snap\x00\xffbinary\n"),
		index:    42,
	}
}

func (s *fakeCluster) Status(context.Context, *tollgatev1.StatusRequest) (*tollgatev1.StatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.status).(*tollgatev1.StatusResponse), nil
}

func (s *fakeCluster) RemoveNode(_ context.Context, req *tollgatev1.RemoveNodeRequest) (*tollgatev1.RemoveNodeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.status.Members, func(m *tollgatev1.Member) bool { return m.Id == req.Id && m.Role != "none" })
	if i < 0 {
		return &tollgatev1.RemoveNodeResponse{NotMember: true}, nil // its leases returned
	}
	s.status.Members = slices.Delete(s.status.Members, i, i+1)
	s.removed = append(s.removed, req.Id)
	return &tollgatev1.RemoveNodeResponse{}, nil
}

func (s *fakeCluster) SaveSnapshot(context.Context, *tollgatev1.SaveSnapshotRequest) (*tollgatev1.SaveSnapshotResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &tollgatev1.SaveSnapshotResponse{Data: slices.Clone(s.snapshot), Index: s.index}, nil
}

func (s *fakeCluster) RestoreSnapshot(_ context.Context, req *tollgatev1.RestoreSnapshotRequest) (*tollgatev1.RestoreSnapshotResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restored = slices.Clone(req.Data)
	return &tollgatev1.RestoreSnapshotResponse{Keys: 3, Routes: 2, Credentials: 1}, nil
}

// setSnapshot sets what SaveSnapshot returns.
func (s *fakeCluster) setSnapshot(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshot = data
}

// restoredData returns the data of the last RestoreSnapshot call.
func (s *fakeCluster) restoredData() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restored
}

// removedNodes returns the ids removed so far.
func (s *fakeCluster) removedNodes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.removed)
}

// lastCreateReq returns the last CreateKey request the server received.
func (s *fakeKeys) lastCreateReq() *tollgatev1.CreateKeyRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastCreate
}

// teamKeys returns the ids of a team's keys.
func (s *fakeKeys) teamKeys(team string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, k := range s.keys {
		if k.TeamId == team {
			ids = append(ids, k.Id)
		}
	}
	return ids
}

// ---- budget statuses ----

// fakeStatuses holds the BudgetStatus the fake reports per budget,
// "key:ID" or "team:ID", as a test sets it.
type fakeStatuses struct {
	mu sync.Mutex
	m  map[string]*tollgatev1.BudgetStatus
}

func (s *fakeStatuses) set(budget string, st *tollgatev1.BudgetStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[budget] = st
}

func (s *fakeStatuses) get(budget string) *tollgatev1.BudgetStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[budget]; ok {
		return proto.Clone(st).(*tollgatev1.BudgetStatus)
	}
	return nil
}

// ---- TeamService ----

type fakeTeams struct {
	tollgatev1.UnimplementedTeamServiceServer
	keys       *fakeKeys
	statuses   *fakeStatuses
	mu         sync.Mutex
	teams      []*tollgatev1.Team
	lastCreate *tollgatev1.CreateTeamRequest
	lastUpdate *tollgatev1.UpdateTeamRequest
	calls      []string
}

func (s *fakeTeams) find(id string) (*tollgatev1.Team, int, error) {
	i := slices.IndexFunc(s.teams, func(t *tollgatev1.Team) bool { return t.Id == id })
	if i < 0 {
		return nil, 0, status.Errorf(codes.NotFound, "team %s not found", id)
	}
	return s.teams[i], i, nil
}

// storedLimits is what the fake stores for rate limits: nil when there
// are none (all zero).
func storedLimits(l *tollgatev1.RateLimits) *tollgatev1.RateLimits {
	if l.GetRpm() == 0 && l.GetTpm() == 0 && l.GetMaxParallel() == 0 {
		return nil
	}
	return proto.Clone(l).(*tollgatev1.RateLimits)
}

func validBudget(b *tollgatev1.Budget) error {
	if b == nil {
		return nil
	}
	if b.LimitNanos <= 0 || !slices.Contains([]string{"day", "week", "month", "total"}, b.Period) {
		return status.Errorf(codes.InvalidArgument, "invalid budget %v", b)
	}
	return nil
}

func (s *fakeTeams) CreateTeam(_ context.Context, req *tollgatev1.CreateTeamRequest) (*tollgatev1.CreateTeamResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "CreateTeam")
	s.lastCreate = proto.Clone(req).(*tollgatev1.CreateTeamRequest)
	if req.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if err := validBudget(req.Budget); err != nil {
		return nil, err
	}
	t := &tollgatev1.Team{Id: fmt.Sprintf("team_%04x", len(s.teams)+1), Name: req.Name, Budget: req.Budget,
		Metadata: req.Metadata, CreatedAt: fakeTime, UpdatedAt: fakeTime, Limits: storedLimits(req.Limits)}
	s.teams = append(s.teams, t)
	return &tollgatev1.CreateTeamResponse{Team: proto.Clone(t).(*tollgatev1.Team)}, nil
}

func (s *fakeTeams) ListTeams(context.Context, *tollgatev1.ListTeamsRequest) (*tollgatev1.ListTeamsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "ListTeams")
	resp := &tollgatev1.ListTeamsResponse{}
	for _, t := range s.teams {
		resp.Teams = append(resp.Teams, proto.Clone(t).(*tollgatev1.Team))
	}
	return resp, nil
}

func (s *fakeTeams) GetTeam(_ context.Context, req *tollgatev1.GetTeamRequest) (*tollgatev1.GetTeamResponse, error) {
	s.mu.Lock()
	s.calls = append(s.calls, "GetTeam")
	t, _, err := s.find(req.Id)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	resp := &tollgatev1.GetTeamResponse{Team: proto.Clone(t).(*tollgatev1.Team)}
	s.mu.Unlock()
	if t.Budget != nil {
		resp.BudgetStatus = s.statuses.get("team:" + req.Id)
	}
	resp.KeyIds = s.keys.teamKeys(req.Id)
	return resp, nil
}

func (s *fakeTeams) UpdateTeam(_ context.Context, req *tollgatev1.UpdateTeamRequest) (*tollgatev1.UpdateTeamResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "UpdateTeam")
	s.lastUpdate = proto.Clone(req).(*tollgatev1.UpdateTeamRequest)
	t, _, err := s.find(req.Id)
	if err != nil {
		return nil, err
	}
	if err := validBudget(req.Budget); err != nil {
		return nil, err
	}
	if req.Name != nil {
		t.Name = *req.Name
	}
	if req.ClearBudget {
		t.Budget = nil
	} else if req.Budget != nil {
		t.Budget = req.Budget
	}
	if req.Limits != nil {
		t.Limits = storedLimits(req.Limits)
	}
	for name, v := range req.Metadata {
		if t.Metadata == nil {
			t.Metadata = map[string]string{}
		}
		if v == "" {
			delete(t.Metadata, name)
		} else {
			t.Metadata[name] = v
		}
	}
	return &tollgatev1.UpdateTeamResponse{Team: proto.Clone(t).(*tollgatev1.Team)}, nil
}

func (s *fakeTeams) DeleteTeam(_ context.Context, req *tollgatev1.DeleteTeamRequest) (*tollgatev1.DeleteTeamResponse, error) {
	if ids := s.keys.teamKeys(req.Id); len(ids) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "team %s still has %d key(s)", req.Id, len(ids))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "DeleteTeam")
	_, i, err := s.find(req.Id)
	if err != nil {
		return nil, err
	}
	s.teams = slices.Delete(s.teams, i, i+1)
	return &tollgatev1.DeleteTeamResponse{}, nil
}

// team returns a copy of a stored team, or nil.
func (s *fakeTeams) team(id string) *tollgatev1.Team {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, _, err := s.find(id)
	if err != nil {
		return nil
	}
	return proto.Clone(t).(*tollgatev1.Team)
}

// lastRequests returns the last CreateTeam and UpdateTeam requests.
func (s *fakeTeams) lastRequests() (*tollgatev1.CreateTeamRequest, *tollgatev1.UpdateTeamRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastCreate, s.lastUpdate
}

// takeCalls returns and clears the RPC names received so far.
func (s *fakeTeams) takeCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

// ---- ModelService.ListPrices ----

// builtinPrices are the fake's built-in prices by upstream model.
var builtinPrices = map[string]*tollgatev1.Price{
	"gpt-4o":      {InputMicrosPerMtok: 2_500_000, OutputMicrosPerMtok: 10_000_000, CachedInputMicrosPerMtok: 1_250_000},
	"gpt-4o-mini": {InputMicrosPerMtok: 150_000, OutputMicrosPerMtok: 600_000},
	"claude-sonnet-4-5": {InputMicrosPerMtok: 3_000_000, OutputMicrosPerMtok: 15_000_000, CachedInputMicrosPerMtok: 300_000,
		CacheWriteMicrosPerMtok: 3_750_000, Tiers: []*tollgatev1.PriceTier{{AbovePromptTokens: 200_000, InputMicrosPerMtok: 6_000_000,
			OutputMicrosPerMtok: 22_500_000, CachedInputMicrosPerMtok: 600_000, CacheWriteMicrosPerMtok: 7_500_000}}},
}

func (s *fakeModels) ListPrices(_ context.Context, req *tollgatev1.ListPricesRequest) (*tollgatev1.ListPricesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("ListPrices")
	names := slices.Sorted(maps.Keys(s.routes))
	if req.Model != "" {
		if _, err := s.route(req.Model); err != nil {
			return nil, err
		}
		names = []string{req.Model}
	}
	resp := &tollgatev1.ListPricesResponse{}
	for _, name := range names {
		for _, d := range s.routes[name].Deployments {
			r := &tollgatev1.PriceRow{Model: name, Deployment: d.Id, Provider: d.Provider, UpstreamModel: d.UpstreamModel, Source: "unknown"}
			switch p, ok := builtinPrices[d.UpstreamModel]; {
			case d.Price != nil:
				r.Price, r.Source = proto.Clone(d.Price).(*tollgatev1.Price), "override"
			case ok:
				r.Price, r.Source = proto.Clone(p).(*tollgatev1.Price), "built-in "+d.Provider+"/"+d.UpstreamModel
			}
			resp.Prices = append(resp.Prices, r)
		}
	}
	return resp, nil
}

// ---- SpendService ----

// fakeSpend answers with what a test set and records the requests.
type fakeSpend struct {
	tollgatev1.UnimplementedSpendServiceServer
	mu         sync.Mutex
	report     *tollgatev1.SpendReportResponse
	logs       *tollgatev1.SpendLogsResponse
	lastReport *tollgatev1.SpendReportRequest
	lastLogs   *tollgatev1.SpendLogsRequest
}

func (s *fakeSpend) SpendReport(_ context.Context, req *tollgatev1.SpendReportRequest) (*tollgatev1.SpendReportResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastReport = proto.Clone(req).(*tollgatev1.SpendReportRequest)
	if s.report == nil {
		return &tollgatev1.SpendReportResponse{Total: &tollgatev1.SpendReportRow{Group: "total"}}, nil
	}
	return proto.Clone(s.report).(*tollgatev1.SpendReportResponse), nil
}

func (s *fakeSpend) SpendLogs(_ context.Context, req *tollgatev1.SpendLogsRequest) (*tollgatev1.SpendLogsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastLogs = proto.Clone(req).(*tollgatev1.SpendLogsRequest)
	if s.logs == nil {
		return &tollgatev1.SpendLogsResponse{}, nil
	}
	return proto.Clone(s.logs).(*tollgatev1.SpendLogsResponse), nil
}

func (s *fakeSpend) set(report *tollgatev1.SpendReportResponse, logs *tollgatev1.SpendLogsResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report, s.logs = report, logs
}

// lastRequests returns the last SpendReport and SpendLogs requests.
func (s *fakeSpend) lastRequests() (*tollgatev1.SpendReportRequest, *tollgatev1.SpendLogsRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastReport, s.lastLogs
}
