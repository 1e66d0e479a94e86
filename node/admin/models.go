package admin

import (
	"context"
	"maps"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// checkDeployment normalises d in place with routing.NormalizeDeployment
// and checks its price override and that its credential, if any, exists.
func (m modelService) checkDeployment(model string, d *pb.Deployment) error {
	if d == nil {
		return invalid("deployment is required")
	}
	if err := checkName("deployment id", d.GetId()); err != nil {
		return err
	}
	if err := routing.NormalizeDeployment(d); err != nil {
		return invalid("model %q, deployment %q: %v", model, d.GetId(), err)
	}
	if err := checkPrice(model, d.GetId(), d.GetPrice()); err != nil {
		return err
	}
	if err := checkRateLimits("deployment", d.GetLimits()); err != nil {
		return err
	}
	return m.checkCredential(d.GetCredential())
}

// checkCredential checks that a named credential exists; "" means none.
func (m modelService) checkCredential(name string) error {
	if name == "" {
		return nil
	}
	if m.s.store.State().Credential(name) == nil {
		return status.Errorf(codes.FailedPrecondition,
			"credential %q does not exist; create it first with: tollctl credential set %s", name, name)
	}
	return nil
}

func (m modelService) AddDeployment(ctx context.Context, req *pb.AddDeploymentRequest) (*pb.AddDeploymentResponse, error) {
	if err := checkName("model name", req.GetModel()); err != nil {
		return nil, err
	}
	var d *pb.Deployment
	if req.GetDeployment() != nil {
		d = proto.Clone(req.GetDeployment()).(*pb.Deployment)
	}
	if err := m.checkDeployment(req.GetModel(), d); err != nil {
		return nil, err
	}
	cmd := &pb.Command{Op: &pb.Command_AddDeployment{AddDeployment: &pb.AddDeploymentCommand{
		Route: req.GetModel(), Deployment: d,
	}}}
	r, err := applyAs[*pb.ModelRoute](ctx, m.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.AddDeploymentResponse{Route: r}, nil
}

func (m modelService) UpdateDeployment(ctx context.Context, req *pb.UpdateDeploymentRequest) (*pb.UpdateDeploymentResponse, error) {
	if err := checkName("model name", req.GetModel()); err != nil {
		return nil, err
	}
	if err := checkName("deployment id", req.GetDeploymentId()); err != nil {
		return nil, err
	}
	if req.Provider == nil && req.BaseUrl == nil && req.UpstreamModel == nil && req.Credential == nil &&
		req.Weight == nil && req.Priority == nil && req.TimeoutMs == nil && req.Limits == nil &&
		!req.GetSetOptions() && req.FirstTokenTimeoutMs == nil {
		return nil, invalid("nothing to update: set at least one of provider, base_url, upstream_model, credential, weight, priority, timeout_ms, first_token_timeout_ms, limits, options")
	}
	cur := findDeployment(m.s.store.State().RouteConfig(req.GetModel()), req.GetDeploymentId())
	if cur == nil {
		return nil, status.Errorf(codes.NotFound, "model %q has no deployment %q", req.GetModel(), req.GetDeploymentId())
	}
	d := patchDeployment(cur, req)
	if err := m.checkDeployment(req.GetModel(), d); err != nil {
		return nil, err
	}
	upd := proto.Clone(req).(*pb.UpdateDeploymentRequest)
	// Normalisation may fill in or tidy the base URL (the openai default,
	// a trailing slash): send the value that passed the check.
	if d.GetBaseUrl() != cur.GetBaseUrl() || upd.BaseUrl != nil {
		upd.BaseUrl = proto.String(d.GetBaseUrl())
	}
	// Likewise the provider (a preset name becomes openai-compatible) and
	// the options (a preset is recorded there).
	if d.GetProvider() != cur.GetProvider() {
		upd.Provider = proto.String(d.GetProvider())
	}
	if !maps.Equal(d.GetOptions(), cur.GetOptions()) {
		upd.Options, upd.SetOptions = d.GetOptions(), true
	}
	cmd := &pb.Command{Op: &pb.Command_UpdateDeployment{UpdateDeployment: &pb.UpdateDeploymentCommand{Update: upd}}}
	r, err := applyAs[*pb.ModelRoute](ctx, m.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.UpdateDeploymentResponse{Route: r}, nil
}

func findDeployment(r *pb.ModelRoute, id string) *pb.Deployment {
	for _, d := range r.GetDeployments() {
		if d.GetId() == id {
			return d
		}
	}
	return nil
}

// patchDeployment returns a copy of cur with the fields set in req applied.
func patchDeployment(cur *pb.Deployment, req *pb.UpdateDeploymentRequest) *pb.Deployment {
	d := proto.Clone(cur).(*pb.Deployment)
	if req.Provider != nil {
		d.Provider = req.GetProvider()
	}
	if req.BaseUrl != nil {
		d.BaseUrl = req.GetBaseUrl()
	}
	if req.UpstreamModel != nil {
		d.UpstreamModel = req.GetUpstreamModel()
	}
	if req.Credential != nil {
		d.Credential = req.GetCredential()
	}
	if req.Weight != nil {
		d.Weight = req.GetWeight()
	}
	if req.Priority != nil {
		d.Priority = req.GetPriority()
	}
	if req.TimeoutMs != nil {
		d.TimeoutMs = req.GetTimeoutMs()
	}
	if req.Limits != nil {
		d.Limits = req.GetLimits()
	}
	if req.GetSetOptions() {
		d.Options = maps.Clone(req.GetOptions())
	}
	if req.FirstTokenTimeoutMs != nil {
		d.FirstTokenTimeoutMs = req.GetFirstTokenTimeoutMs()
	}
	return d
}

// SetRouteOptions replaces a route's routing options. Fallback models must
// exist when they are set (a later deletion leaves a dangling name, which
// the data plane skips).
func (m modelService) SetRouteOptions(ctx context.Context, req *pb.SetRouteOptionsRequest) (*pb.SetRouteOptionsResponse, error) {
	if err := checkName("model name", req.GetModel()); err != nil {
		return nil, err
	}
	o := req.GetOptions()
	if o == nil {
		o = &pb.RouteOptions{}
	}
	if err := raftstore.ValidateRouteOptions(req.GetModel(), o); err != nil {
		return nil, invalid("%v", strings.TrimSuffix(err.Error(), ": "+raftstore.ErrInvalid.Error()))
	}
	st := m.s.store.State()
	for _, list := range [][]string{o.GetFallbacks(), o.GetContextFallbacks()} {
		for _, f := range list {
			if st.Resolve(f) == nil {
				return nil, status.Errorf(codes.FailedPrecondition, "fallback model %q does not exist; add it first", f)
			}
		}
	}
	for _, a := range o.GetAliases() {
		if err := checkName("alias", a); err != nil {
			return nil, err
		}
	}
	cmd := &pb.Command{Op: &pb.Command_SetRouteOptions{SetRouteOptions: &pb.SetRouteOptionsCommand{
		Route: req.GetModel(), Options: o}}}
	r, err := applyAs[*pb.ModelRoute](ctx, m.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.SetRouteOptionsResponse{Route: r}, nil
}

func (m modelService) RemoveDeployment(ctx context.Context, req *pb.RemoveDeploymentRequest) (*pb.RemoveDeploymentResponse, error) {
	if err := checkName("model name", req.GetModel()); err != nil {
		return nil, err
	}
	if err := checkName("deployment id", req.GetDeploymentId()); err != nil {
		return nil, err
	}
	cmd := &pb.Command{Op: &pb.Command_RemoveDeployment{RemoveDeployment: &pb.RemoveDeploymentCommand{
		Route: req.GetModel(), DeploymentId: req.GetDeploymentId(),
	}}}
	r, err := applyAs[*pb.ModelRoute](ctx, m.s, cmd, true)
	if err != nil {
		return nil, err
	}
	return &pb.RemoveDeploymentResponse{Route: r}, nil
}

func (m modelService) DeleteModel(ctx context.Context, req *pb.DeleteModelRequest) (*pb.DeleteModelResponse, error) {
	if err := checkName("model name", req.GetModel()); err != nil {
		return nil, err
	}
	cmd := &pb.Command{Op: &pb.Command_DeleteRoute{DeleteRoute: &pb.DeleteRouteCommand{Route: req.GetModel()}}}
	if _, err := m.s.apply(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.DeleteModelResponse{}, nil
}

func (m modelService) ListModels(context.Context, *pb.ListModelsRequest) (*pb.ListModelsResponse, error) {
	st := m.s.store.State()
	var out []*pb.ModelRoute
	for _, r := range st.RouteConfigs() {
		out = append(out, proto.Clone(r).(*pb.ModelRoute))
	}
	return &pb.ListModelsResponse{Routes: out, Health: m.healthOf("")}, nil
}

// healthOf is this node's live view of route's deployments (every
// route's for ""), stamped with the node's id.
func (m modelService) healthOf(route string) []*pb.DeploymentHealth {
	if m.s.health == nil {
		return nil
	}
	hs := m.s.health(route)
	for _, h := range hs {
		h.Node = m.s.nodeID
	}
	return hs
}

func (m modelService) GetModel(_ context.Context, req *pb.GetModelRequest) (*pb.GetModelResponse, error) {
	if req.GetModel() == "" {
		return nil, invalid("model name is required")
	}
	r := m.s.store.State().RouteConfig(req.GetModel())
	if r == nil {
		return nil, status.Errorf(codes.NotFound, "model %q not found", req.GetModel())
	}
	return &pb.GetModelResponse{Route: proto.Clone(r).(*pb.ModelRoute), Health: m.healthOf(req.GetModel())}, nil
}

// priceSourceUnknown is the source ListPrices shows when Config.Prices is
// nil or gives no source.
const priceSourceUnknown = "unknown"

// ListPrices shows, for every deployment of every route (or of one), the
// price Config.Prices finds for it.
func (m modelService) ListPrices(_ context.Context, req *pb.ListPricesRequest) (*pb.ListPricesResponse, error) {
	st := m.s.store.State()
	var routes []*pb.ModelRoute
	if name := req.GetModel(); name != "" {
		r := st.RouteConfig(name)
		if r == nil {
			return nil, status.Errorf(codes.NotFound, "model %q not found", name)
		}
		routes = []*pb.ModelRoute{r}
	} else {
		routes = st.RouteConfigs() // sorted by name
	}
	var out []*pb.PriceRow
	for _, r := range routes {
		ds := append([]*pb.Deployment(nil), r.GetDeployments()...)
		sort.Slice(ds, func(i, j int) bool { return ds[i].GetId() < ds[j].GetId() })
		for _, d := range ds {
			row := &pb.PriceRow{
				Model:         r.GetName(),
				Deployment:    d.GetId(),
				Provider:      d.GetProvider(),
				UpstreamModel: d.GetUpstreamModel(),
				Source:        priceSourceUnknown,
			}
			if m.s.prices != nil {
				var override *pb.Price
				if d.GetPrice() != nil {
					override = proto.Clone(d.GetPrice()).(*pb.Price)
				}
				p, src := m.s.prices(d.GetProvider(), d.GetBaseUrl(), d.GetUpstreamModel(), override)
				if p != nil {
					row.Price = proto.Clone(p).(*pb.Price)
				}
				if src != "" {
					row.Source = src
				}
			}
			out = append(out, row)
		}
	}
	return &pb.ListPricesResponse{Prices: out}, nil
}

// TestModel sends a tiny request through the model's route on this node.
func (m modelService) TestModel(ctx context.Context, req *pb.TestModelRequest) (*pb.TestModelResponse, error) {
	if err := checkName("model name", req.GetModel()); err != nil {
		return nil, err
	}
	if m.s.testModel == nil {
		return nil, status.Error(codes.Unimplemented, "this node has no data plane to test through")
	}
	if m.s.store.State().Resolve(req.GetModel()) == nil {
		return nil, status.Errorf(codes.NotFound, "model %q not found", req.GetModel())
	}
	return m.s.testModel(ctx, req)
}
