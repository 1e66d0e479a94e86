package admin

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

func TestAddDeployment(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)
	_, err := env.creds.SetCredential(ctx, &pb.SetCredentialRequest{Name: "openai", Value: "sk-test-0123456789"})
	mustOK(t, err)

	resp, err := env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "gpt-4o", Deployment: &pb.Deployment{
		Id: "openai", Provider: "openai", UpstreamModel: "gpt-4o", Credential: "openai",
	}})
	mustOK(t, err)
	r := resp.GetRoute()
	if r.GetName() != "gpt-4o" || len(r.GetDeployments()) != 1 || r.GetCreatedAt() == nil {
		t.Fatalf("route = %v", r)
	}
	if got := r.GetDeployments()[0].GetBaseUrl(); got != routing.OpenAIBaseURL {
		t.Errorf("base_url = %q, want the openai default", got)
	}
	if rv := store.State().Route("gpt-4o"); rv == nil || rv.Deployments[0].Credential != "sk-test-0123456789" {
		t.Errorf("data plane route = %+v", rv)
	}

	// A second deployment joins the route; the base URL is tidied.
	resp, err = env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "gpt-4o", Deployment: &pb.Deployment{
		Id: "local", Provider: "openai-compatible", BaseUrl: "http://10.0.0.7:8000/v1/", UpstreamModel: "llama", Priority: 1,
	}})
	mustOK(t, err)
	if ds := resp.GetRoute().GetDeployments(); len(ds) != 2 || ds[1].GetBaseUrl() != "http://10.0.0.7:8000/v1" {
		t.Errorf("deployments = %v", ds)
	}
	_, err = env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "gpt-4o", Deployment: &pb.Deployment{
		Id: "local", Provider: "demo",
	}})
	st := wantCode(t, err, codes.AlreadyExists)
	if !strings.Contains(st.Message(), `"local"`) {
		t.Errorf("message does not name the deployment: %q", st.Message())
	}

	invalidCases := map[string]*pb.AddDeploymentRequest{
		"no model":              {Deployment: &pb.Deployment{Id: "d", Provider: "demo"}},
		"model with space":      {Model: "gpt 4o", Deployment: &pb.Deployment{Id: "d", Provider: "demo"}},
		"long model":            {Model: strings.Repeat("m", 201), Deployment: &pb.Deployment{Id: "d", Provider: "demo"}},
		"no deployment":         {Model: "m"},
		"no deployment id":      {Model: "m", Deployment: &pb.Deployment{Provider: "demo"}},
		"compatible no baseurl": {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "openai-compatible", UpstreamModel: "x"}},
		"unknown provider":      {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "cohere", UpstreamModel: "x"}},
		"no provider":           {Model: "m", Deployment: &pb.Deployment{Id: "d"}},
		"no upstream model":     {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "openai"}},
		"bad base url":          {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "openai", BaseUrl: "ftp://x", UpstreamModel: "x"}},
		"negative input price": {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "demo",
			Price: &pb.Price{InputMicrosPerMtok: -1, OutputMicrosPerMtok: 5}}},
		"negative output price": {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "demo",
			Price: &pb.Price{InputMicrosPerMtok: 5, OutputMicrosPerMtok: -1}}},
		"negative cached price": {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "demo",
			Price: &pb.Price{CachedInputMicrosPerMtok: -1}}},
	}
	for name, req := range invalidCases {
		t.Run(name, func(t *testing.T) {
			_, err := env.models.AddDeployment(ctx, req)
			wantCode(t, err, codes.InvalidArgument)
		})
	}
	_, err = env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "m", Deployment: &pb.Deployment{
		Id: "d", Provider: "openai", UpstreamModel: "x", Credential: "nope",
	}})
	st = wantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(st.Message(), "tollctl credential set nope") {
		t.Errorf("missing-credential message = %q", st.Message())
	}
	if store.State().RouteConfig("m") != nil {
		t.Error("a rejected deployment created a route")
	}
}

func TestModelLifecycle(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)
	_, err := env.creds.SetCredential(ctx, &pb.SetCredentialRequest{Name: "vllm", Value: "vllm-secret-0123456789"})
	mustOK(t, err)
	for _, m := range []string{"zeta", "alpha"} {
		_, err := env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: m, Deployment: &pb.Deployment{Id: "demo", Provider: "demo"}})
		mustOK(t, err)
	}
	_, err = env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "alpha", Deployment: &pb.Deployment{
		Id: "oa", Provider: "openai", UpstreamModel: "gpt-4o-mini", Weight: 2,
	}})
	mustOK(t, err)

	// List is sorted by name; Get returns one route.
	list, err := env.models.ListModels(ctx, &pb.ListModelsRequest{})
	mustOK(t, err)
	if rs := list.GetRoutes(); len(rs) != 2 || rs[0].GetName() != "alpha" || rs[1].GetName() != "zeta" {
		t.Fatalf("ListModels = %v", rs)
	}
	got, err := env.models.GetModel(ctx, &pb.GetModelRequest{Model: "alpha"})
	mustOK(t, err)
	if !proto.Equal(got.GetRoute(), list.GetRoutes()[0]) {
		t.Errorf("GetModel = %v", got.GetRoute())
	}
	_, err = env.models.GetModel(ctx, &pb.GetModelRequest{Model: "nope"})
	wantCode(t, err, codes.NotFound)

	// Update patches only the given fields.
	up, err := env.models.UpdateDeployment(ctx, &pb.UpdateDeploymentRequest{
		Model: "alpha", DeploymentId: "oa", Priority: proto.Uint32(3), TimeoutMs: proto.Uint32(9000),
	})
	mustOK(t, err)
	d := up.GetRoute().GetDeployments()[1]
	if d.GetPriority() != 3 || d.GetTimeoutMs() != 9000 || d.GetWeight() != 2 || d.GetUpstreamModel() != "gpt-4o-mini" ||
		d.GetBaseUrl() != routing.OpenAIBaseURL {
		t.Errorf("after update: %v", d)
	}
	// Switching a demo deployment to a real provider is normalised as a
	// whole: openai fills in its default base URL.
	up, err = env.models.UpdateDeployment(ctx, &pb.UpdateDeploymentRequest{
		Model: "alpha", DeploymentId: "demo", Provider: proto.String("openai"), UpstreamModel: proto.String("gpt-4o"),
	})
	mustOK(t, err)
	if d := up.GetRoute().GetDeployments()[0]; d.GetProvider() != "openai" || d.GetBaseUrl() != routing.OpenAIBaseURL {
		t.Errorf("after provider switch: %v", d)
	}
	up, err = env.models.UpdateDeployment(ctx, &pb.UpdateDeploymentRequest{
		Model: "alpha", DeploymentId: "oa", Provider: proto.String("openai-compatible"),
		BaseUrl: proto.String("http://vllm:8000/v1/"), Credential: proto.String("vllm"),
	})
	mustOK(t, err)
	if d := up.GetRoute().GetDeployments()[1]; d.GetBaseUrl() != "http://vllm:8000/v1" || d.GetCredential() != "vllm" {
		t.Errorf("after move to vllm: %v", d)
	}
	// Clearing the credential is allowed.
	_, err = env.models.UpdateDeployment(ctx, &pb.UpdateDeploymentRequest{Model: "alpha", DeploymentId: "oa", Credential: proto.String("")})
	mustOK(t, err)

	for name, req := range map[string]*pb.UpdateDeploymentRequest{
		"nothing set":      {Model: "alpha", DeploymentId: "oa"},
		"no model":         {DeploymentId: "oa", Weight: proto.Uint32(1)},
		"no deployment":    {Model: "alpha", Weight: proto.Uint32(1)},
		"unknown provider": {Model: "alpha", DeploymentId: "oa", Provider: proto.String("bedrock")},
		"drop base url":    {Model: "alpha", DeploymentId: "oa", BaseUrl: proto.String("")},
		"drop upstream":    {Model: "alpha", DeploymentId: "oa", UpstreamModel: proto.String("")},
	} {
		_, err := env.models.UpdateDeployment(ctx, req)
		if st := wantCode(t, err, codes.InvalidArgument); st.Message() == "" {
			t.Errorf("%s: empty message", name)
		}
	}
	_, err = env.models.UpdateDeployment(ctx, &pb.UpdateDeploymentRequest{Model: "alpha", DeploymentId: "oa", Credential: proto.String("missing")})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = env.models.UpdateDeployment(ctx, &pb.UpdateDeploymentRequest{Model: "alpha", DeploymentId: "nope", Weight: proto.Uint32(1)})
	wantCode(t, err, codes.NotFound)
	_, err = env.models.UpdateDeployment(ctx, &pb.UpdateDeploymentRequest{Model: "nope", DeploymentId: "oa", Weight: proto.Uint32(1)})
	wantCode(t, err, codes.NotFound)

	// Remove: the route survives while it has deployments.
	rm, err := env.models.RemoveDeployment(ctx, &pb.RemoveDeploymentRequest{Model: "alpha", DeploymentId: "demo"})
	mustOK(t, err)
	if ds := rm.GetRoute().GetDeployments(); len(ds) != 1 || ds[0].GetId() != "oa" {
		t.Errorf("after remove: %v", ds)
	}
	rm, err = env.models.RemoveDeployment(ctx, &pb.RemoveDeploymentRequest{Model: "alpha", DeploymentId: "oa"})
	mustOK(t, err)
	if rm.GetRoute() != nil {
		t.Errorf("removing the last deployment returned route %v", rm.GetRoute())
	}
	if store.State().RouteConfig("alpha") != nil {
		t.Error("route alpha still exists after its last deployment was removed")
	}
	_, err = env.models.RemoveDeployment(ctx, &pb.RemoveDeploymentRequest{Model: "alpha", DeploymentId: "oa"})
	wantCode(t, err, codes.NotFound)

	// Delete.
	_, err = env.models.DeleteModel(ctx, &pb.DeleteModelRequest{Model: "zeta"})
	mustOK(t, err)
	_, err = env.models.DeleteModel(ctx, &pb.DeleteModelRequest{Model: "zeta"})
	st := wantCode(t, err, codes.NotFound)
	if !strings.Contains(st.Message(), "zeta") {
		t.Errorf("not-found message does not name the model: %q", st.Message())
	}
	_, err = env.models.DeleteModel(ctx, &pb.DeleteModelRequest{})
	wantCode(t, err, codes.InvalidArgument)
	list, err = env.models.ListModels(ctx, &pb.ListModelsRequest{})
	mustOK(t, err)
	if len(list.GetRoutes()) != 0 {
		t.Errorf("routes left: %v", list.GetRoutes())
	}
}

func TestPriceOverride(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)

	price := &pb.Price{InputMicrosPerMtok: 150_000, OutputMicrosPerMtok: 600_000, CachedInputMicrosPerMtok: 75_000}
	_, err := env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "m", Deployment: &pb.Deployment{
		Id: "priced", Provider: "openai", UpstreamModel: "gpt-4o-mini", Price: price,
	}})
	mustOK(t, err)
	// All zero is a free model: allowed.
	_, err = env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "m", Deployment: &pb.Deployment{
		Id: "free", Provider: "openai-compatible", BaseUrl: "http://local:8000/v1", UpstreamModel: "llama", Price: &pb.Price{},
	}})
	mustOK(t, err)
	_, err = env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "m", Deployment: &pb.Deployment{
		Id: "neg", Provider: "demo", Price: &pb.Price{OutputMicrosPerMtok: -600_000},
	}})
	st := wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(st.Message(), "output_micros_per_mtok") || !strings.Contains(st.Message(), `"neg"`) {
		t.Errorf("negative-price message = %q", st.Message())
	}

	// Tiers must ascend from at least one token, and hold no negative rate.
	tier := func(above, in int64) *pb.PriceTier {
		return &pb.PriceTier{AbovePromptTokens: above, InputMicrosPerMtok: in, OutputMicrosPerMtok: 1}
	}
	for _, tc := range []struct {
		name string
		p    *pb.Price
		msg  string
	}{
		{"negative cache write", &pb.Price{CacheWriteMicrosPerMtok: -1}, "cache_write_micros_per_mtok must not be negative"},
		{"tier at zero", &pb.Price{Tiers: []*pb.PriceTier{tier(0, 1)}}, "tier 1 above_prompt_tokens must be positive; got 0"},
		{"tier without the base's cache read", &pb.Price{CachedInputMicrosPerMtok: 5, Tiers: []*pb.PriceTier{tier(10, 1)}}, "tier 1 needs cached_input_micros_per_mtok"},
		{"tier without the base's cache write", &pb.Price{CacheWriteMicrosPerMtok: 5, Tiers: []*pb.PriceTier{{AbovePromptTokens: 10, CachedInputMicrosPerMtok: 1}}}, "tier 1 needs cache_write_micros_per_mtok"},
		{"tiers descending", &pb.Price{Tiers: []*pb.PriceTier{tier(200, 1), tier(100, 1)}}, "tier 2 starts above 100 prompt tokens"},
		{"tiers repeated", &pb.Price{Tiers: []*pb.PriceTier{tier(100, 1), tier(100, 1)}}, "tier 2 starts above 100"},
		{"negative tier rate", &pb.Price{Tiers: []*pb.PriceTier{tier(100, -5)}}, "tier 1 input_micros_per_mtok must not be negative"},
		{"too many tiers", &pb.Price{Tiers: []*pb.PriceTier{tier(1, 1), tier(2, 1), tier(3, 1), tier(4, 1), tier(5, 1), tier(6, 1), tier(7, 1), tier(8, 1), tier(9, 1)}}, "9 tiers; at most 8"},
	} {
		_, err = env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "m", Deployment: &pb.Deployment{Id: "bad", Provider: "demo", Price: tc.p}})
		if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), tc.msg) {
			t.Errorf("%s: message %q; want %q", tc.name, st.Message(), tc.msg)
		}
	}
	long := &pb.Price{InputMicrosPerMtok: 3_000_000, OutputMicrosPerMtok: 15_000_000, CacheWriteMicrosPerMtok: 3_750_000,
		Tiers: []*pb.PriceTier{{AbovePromptTokens: 200_000, InputMicrosPerMtok: 6_000_000, CacheWriteMicrosPerMtok: 7_500_000},
			{AbovePromptTokens: 1_000_000, InputMicrosPerMtok: 9_000_000, CacheWriteMicrosPerMtok: 9_000_000}}}
	_, err = env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "long", Deployment: &pb.Deployment{Id: "tiers", Provider: "demo", Price: long}})
	mustOK(t, err)
	if d := store.State().Route("long").Deployments[0]; !proto.Equal(d.Price, long) {
		t.Errorf("tiered price stored as %v", d.Price)
	}

	rv := store.State().Route("m")
	if rv == nil || len(rv.Deployments) != 2 || !proto.Equal(rv.Deployments[0].Price, price) ||
		rv.Deployments[1].Price == nil {
		t.Fatalf("data plane route = %+v", rv)
	}
	// An update (which cannot change the price) keeps it.
	up, err := env.models.UpdateDeployment(ctx, &pb.UpdateDeploymentRequest{Model: "m", DeploymentId: "priced", Weight: proto.Uint32(3)})
	mustOK(t, err)
	if d := up.GetRoute().GetDeployments()[0]; !proto.Equal(d.GetPrice(), price) || d.GetWeight() != 3 {
		t.Errorf("after update: %v", d)
	}
}

// fakePrices is a price table: an override wins, then gpt-4o on openai is
// known, everything else is not.
type fakePrices struct {
	mu    sync.Mutex
	calls []string
}

var gpt4oPrice = &pb.Price{InputMicrosPerMtok: 2_500_000, OutputMicrosPerMtok: 10_000_000, CachedInputMicrosPerMtok: 1_250_000}

func (f *fakePrices) lookup(kind, baseURL, model string, override *pb.Price) (*pb.Price, string) {
	f.mu.Lock()
	f.calls = append(f.calls, kind+" "+baseURL+" "+model)
	f.mu.Unlock()
	switch {
	case override != nil:
		return override, "override"
	case kind == "openai" && model == "gpt-4o":
		return gpt4oPrice, "built-in openai/gpt-4o"
	}
	return nil, "" // the admin API fills in "unknown"
}

func TestListPrices(t *testing.T) {
	store := openStore(t)
	fp := &fakePrices{}
	env := startServerWith(t, Config{Store: store, Prices: fp.lookup}, nil)
	ctx := ctxT(t)

	// The empty list.
	resp, err := env.models.ListPrices(ctx, &pb.ListPricesRequest{})
	mustOK(t, err)
	if len(resp.GetPrices()) != 0 {
		t.Errorf("ListPrices without routes = %v", resp.GetPrices())
	}

	override := &pb.Price{InputMicrosPerMtok: 100, OutputMicrosPerMtok: 200}
	for _, add := range []*pb.AddDeploymentRequest{
		{Model: "llama", Deployment: &pb.Deployment{Id: "vllm", Provider: "openai-compatible",
			BaseUrl: "http://vllm:8000/v1", UpstreamModel: "llama-3"}},
		{Model: "gpt-4o", Deployment: &pb.Deployment{Id: "zz-openai", Provider: "openai", UpstreamModel: "gpt-4o"}},
		{Model: "gpt-4o", Deployment: &pb.Deployment{Id: "aa-proxy", Provider: "openai-compatible",
			BaseUrl: "http://proxy/v1", UpstreamModel: "gpt-4o", Price: override}},
	} {
		_, err := env.models.AddDeployment(ctx, add)
		mustOK(t, err)
	}

	want := []*pb.PriceRow{
		{Model: "gpt-4o", Deployment: "aa-proxy", Provider: "openai-compatible", UpstreamModel: "gpt-4o",
			Price: override, Source: "override"},
		{Model: "gpt-4o", Deployment: "zz-openai", Provider: "openai", UpstreamModel: "gpt-4o",
			Price: gpt4oPrice, Source: "built-in openai/gpt-4o"},
		{Model: "llama", Deployment: "vllm", Provider: "openai-compatible", UpstreamModel: "llama-3",
			Source: "unknown"},
	}
	resp, err = env.models.ListPrices(ctx, &pb.ListPricesRequest{})
	mustOK(t, err)
	if got := resp.GetPrices(); len(got) != len(want) {
		t.Fatalf("ListPrices = %v", got)
	} else {
		for i := range want {
			if !proto.Equal(got[i], want[i]) {
				t.Errorf("row %d:\n got %v\nwant %v", i, got[i], want[i])
			}
		}
	}
	// The table was asked with the stored provider, base URL and upstream
	// model (the openai default filled in).
	fp.mu.Lock()
	calls := strings.Join(fp.calls, "\n")
	fp.mu.Unlock()
	for _, c := range []string{"openai " + routing.OpenAIBaseURL + " gpt-4o", "openai-compatible http://proxy/v1 gpt-4o",
		"openai-compatible http://vllm:8000/v1 llama-3"} {
		if !strings.Contains(calls, c) {
			t.Errorf("Prices not called with %q; calls:\n%s", c, calls)
		}
	}

	// One model.
	resp, err = env.models.ListPrices(ctx, &pb.ListPricesRequest{Model: "llama"})
	mustOK(t, err)
	if got := resp.GetPrices(); len(got) != 1 || !proto.Equal(got[0], want[2]) {
		t.Errorf("ListPrices(llama) = %v", got)
	}
	_, err = env.models.ListPrices(ctx, &pb.ListPricesRequest{Model: "nope"})
	st := wantCode(t, err, codes.NotFound)
	if !strings.Contains(st.Message(), "nope") {
		t.Errorf("not-found message = %q", st.Message())
	}

	// Without a price table every price is unknown.
	bare := startServer(t, store)
	resp, err = bare.models.ListPrices(ctx, &pb.ListPricesRequest{})
	mustOK(t, err)
	if got := resp.GetPrices(); len(got) != 3 {
		t.Fatalf("ListPrices without a table = %v", got)
	} else {
		for i, r := range got {
			if r.GetPrice() != nil || r.GetSource() != "unknown" || r.GetModel() != want[i].GetModel() ||
				r.GetDeployment() != want[i].GetDeployment() {
				t.Errorf("row %d without a table = %v", i, r)
			}
		}
	}
}

func TestSetRouteOptions(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)
	for _, name := range []string{"primary", "backup"} {
		_, err := env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: name, Deployment: &pb.Deployment{Id: "d", Provider: "demo"}})
		mustOK(t, err)
	}
	resp, err := env.models.SetRouteOptions(ctx, &pb.SetRouteOptionsRequest{Model: "primary", Options: &pb.RouteOptions{
		Strategy: "least-inflight", Fallbacks: []string{"backup"}, Aliases: []string{"main"}, MaxAttempts: 4}})
	mustOK(t, err)
	if o := resp.GetRoute().GetOptions(); o.GetStrategy() != "least-inflight" || o.GetMaxAttempts() != 4 {
		t.Errorf("options = %v", o)
	}
	if r := store.State().Resolve("main"); r == nil || r.Name != "primary" {
		t.Errorf("alias resolves to %v", r)
	}
	for name, tc := range map[string]struct {
		req  *pb.SetRouteOptionsRequest
		code codes.Code
	}{
		"unknown strategy": {&pb.SetRouteOptionsRequest{Model: "primary", Options: &pb.RouteOptions{Strategy: "fast"}}, codes.InvalidArgument},
		"missing fallback": {&pb.SetRouteOptionsRequest{Model: "primary", Options: &pb.RouteOptions{Fallbacks: []string{"nope"}}}, codes.FailedPrecondition},
		"self fallback":    {&pb.SetRouteOptionsRequest{Model: "primary", Options: &pb.RouteOptions{Fallbacks: []string{"primary"}}}, codes.InvalidArgument},
		"alias taken":      {&pb.SetRouteOptionsRequest{Model: "backup", Options: &pb.RouteOptions{Aliases: []string{"main"}}}, codes.AlreadyExists},
		"unknown model":    {&pb.SetRouteOptionsRequest{Model: "nope", Options: &pb.RouteOptions{}}, codes.NotFound},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := env.models.SetRouteOptions(ctx, tc.req)
			wantCode(t, err, tc.code)
		})
	}
	// TestModel without a data plane says so.
	_, err = env.models.TestModel(ctx, &pb.TestModelRequest{Model: "primary"})
	wantCode(t, err, codes.Unimplemented)
}

func TestTestModelHook(t *testing.T) {
	store := openStore(t)
	var got *pb.TestModelRequest
	env := startServerWith(t, Config{Store: store, TestModel: func(_ context.Context, req *pb.TestModelRequest) (*pb.TestModelResponse, error) {
		got = req
		return &pb.TestModelResponse{Status: 200, Deployment: "d"}, nil
	}}, time.Now)
	ctx := ctxT(t)
	_, err := env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "demo"}})
	mustOK(t, err)
	resp, err := env.models.TestModel(ctx, &pb.TestModelRequest{Model: "m", Prompt: "hi"})
	mustOK(t, err)
	if resp.GetDeployment() != "d" || got.GetPrompt() != "hi" {
		t.Errorf("resp %v, hook got %v", resp, got)
	}
	_, err = env.models.TestModel(ctx, &pb.TestModelRequest{Model: "unknown"})
	wantCode(t, err, codes.NotFound)
}

// ListModels and GetModel carry the answering node's live view of the
// deployments (Config.Health), stamped with the node's id.
func TestModelsCarryThisNodesDeploymentHealth(t *testing.T) {
	store := openStore(t)
	var asked []string
	health := func(route string) []*pb.DeploymentHealth {
		asked = append(asked, route)
		return []*pb.DeploymentHealth{{Route: "m", Deployment: "d1", Cooling: true, ConsecutiveFailures: 2}}
	}
	env := startServerWith(t, Config{Store: store, Health: health, NodeID: "n7"}, nil)
	ctx := ctxT(t)
	_, err := env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "m", Deployment: &pb.Deployment{
		Id: "d1", Provider: "openai", UpstreamModel: "gpt-4o"}})
	mustOK(t, err)
	list, err := env.models.ListModels(ctx, &pb.ListModelsRequest{})
	mustOK(t, err)
	got, err := env.models.GetModel(ctx, &pb.GetModelRequest{Model: "m"})
	mustOK(t, err)
	for name, hs := range map[string][]*pb.DeploymentHealth{"ListModels": list.GetHealth(), "GetModel": got.GetHealth()} {
		if len(hs) != 1 || !hs[0].GetCooling() || hs[0].GetNode() != "n7" || hs[0].GetConsecutiveFailures() != 2 {
			t.Errorf("%s health = %v, want d1 cooling on n7", name, hs)
		}
	}
	if len(asked) != 2 || asked[0] != "" || asked[1] != "m" {
		t.Errorf("Health asked for %q, want every route then m", asked)
	}
}
