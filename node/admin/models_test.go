package admin

import (
	"strings"
	"testing"

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
		"unknown provider":      {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "anthropic", UpstreamModel: "x"}},
		"no provider":           {Model: "m", Deployment: &pb.Deployment{Id: "d"}},
		"no upstream model":     {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "openai"}},
		"bad base url":          {Model: "m", Deployment: &pb.Deployment{Id: "d", Provider: "openai", BaseUrl: "ftp://x", UpstreamModel: "x"}},
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
