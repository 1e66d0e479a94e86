package main

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

var providers = []string{"openai", "openai-compatible", "demo"}

const openAIBaseURL = "https://api.openai.com/v1"

// deploymentFlags are the per-deployment settings shared by add and update.
type deploymentFlags struct {
	provider, baseURL, upstreamModel, credential string
	weight, priority                             uint32
	timeout                                      string
	// Prices in dollars per million tokens; model add only.
	inputPrice, outputPrice, cachedPrice string
	limits                               limitFlags
}

func newDeploymentFlags() *deploymentFlags {
	return &deploymentFlags{limits: limitFlags{what: "deployment"}}
}

// register adds the flags; add selects the help texts for model add, where
// unset flags get defaults, rather than model update, where they stay as is.
func (d *deploymentFlags) register(cmd *cobra.Command, add bool) {
	f := cmd.Flags()
	baseURL, upstream, timeout := "API root including the version path, e.g. http://127.0.0.1:8000/v1 (default for openai: "+openAIBaseURL+"; not used by demo)",
		"model name sent upstream (default: NAME)",
		"upstream request timeout for this deployment, e.g. 30s or 2m (default: the node's)"
	if !add {
		baseURL = "new API root including the version path, e.g. http://127.0.0.1:8000/v1"
		upstream = "new model name sent upstream"
		timeout = "new upstream request timeout, e.g. 30s or 2m; 0 goes back to the node's default"
	}
	f.StringVar(&d.provider, "provider", "", "provider kind: "+strings.Join(providers, ", "))
	f.StringVar(&d.baseURL, "base-url", "", baseURL)
	f.StringVar(&d.upstreamModel, "upstream-model", "", upstream)
	f.StringVar(&d.credential, "credential", "", "name of the stored credential sent upstream (see tollctl credential); empty for none")
	f.Uint32Var(&d.weight, "weight", 0, "relative share of traffic among deployments of the same priority (0 means 1)")
	f.Uint32Var(&d.priority, "priority", 0, "lower is preferred; higher priorities serve only when all lower ones failed")
	f.StringVar(&d.timeout, "upstream-timeout", "", timeout)
	if add {
		f.StringVar(&d.inputPrice, "input-price", "", "price override: dollars per million prompt tokens, e.g. 2.50 (default: the built-in price of the upstream model, see model prices)")
		f.StringVar(&d.outputPrice, "output-price", "", "price override: dollars per million completion tokens, e.g. 10; needed with --input-price")
		f.StringVar(&d.cachedPrice, "cached-price", "", "price override: dollars per million cached prompt tokens, e.g. 1.25 (default: the input price)")
	}
	d.limits.register(cmd, !add)
}

// price builds the price override of model add, nil without price flags.
func (d *deploymentFlags) price(f *pflag.FlagSet) (*tollgatev1.Price, error) {
	in, out, cached := f.Changed("input-price"), f.Changed("output-price"), f.Changed("cached-price")
	if !in && !out && !cached {
		return nil, nil
	}
	if !in || !out {
		return nil, usageErrorf("a price override needs both --input-price and --output-price (dollars per million tokens)")
	}
	p := &tollgatev1.Price{}
	var err error
	if p.InputMicrosPerMtok, err = moneyFlag("input-price", d.inputPrice, microDecimals); err != nil {
		return nil, err
	}
	if p.OutputMicrosPerMtok, err = moneyFlag("output-price", d.outputPrice, microDecimals); err != nil {
		return nil, err
	}
	if cached {
		if p.CachedInputMicrosPerMtok, err = moneyFlag("cached-price", d.cachedPrice, microDecimals); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (a *app) modelAddCommand() *cobra.Command {
	var (
		d  = newDeploymentFlags()
		id string
	)
	cmd := &cobra.Command{
		Use:   "add NAME --provider P [--base-url URL]",
		Short: "Add a deployment to a model route, creating the route if needed",
		Long: `Add a deployment serving the public model NAME. The route is created if it
does not exist yet.

Without --deployment, the deployment id is the provider name, with -2, -3 ...
appended if that id is already taken in the route. --upstream-model defaults
to NAME. --base-url is the API root including /v1; it is required except for
the demo provider and defaults to ` + openAIBaseURL + ` for openai.

Spend is counted with the built-in price of the upstream model when Tollgate
knows it. --input-price and --output-price (with --cached-price optional)
override it, in dollars per million tokens, up to 6 decimals; use them for
self-hosted or unknown models, or negotiated prices. The price cannot be
changed by model update: remove and add the deployment again. See
tollctl model prices for the price each deployment uses.

--rpm, --tpm and --max-parallel protect the upstream, cluster-wide: requests
per minute, tokens (prompt plus completion) per minute and requests in
flight at once. A deployment at one of its limits is skipped in favour of
the others; 0 means unlimited.`,
		Example: `  tollctl model add gpt-4o --provider openai --credential openai
  tollctl model add llama --provider openai-compatible --base-url http://127.0.0.1:8000/v1 \
      --upstream-model meta-llama/Llama-3.1-8B --deployment local-vllm --weight 3 --upstream-timeout 2m
  tollctl model add echo --provider demo
  tollctl model add llama --provider openai-compatible --base-url http://127.0.0.1:8000/v1 \
      --input-price 0.20 --output-price 0.60
  tollctl model add gpt-4o --provider openai --credential openai --rpm 500 --tpm 30000 --max-parallel 20`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			dep, err := d.deployment(cmd.Flags(), name)
			if err != nil {
				return err
			}
			if dep.BaseUrl != "" && !hasVersionPath(dep.BaseUrl) {
				fmt.Fprintf(a.stderr, "note: --base-url %s has no path; the API root usually ends in /v1\n", dep.BaseUrl)
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			dep.Id = id
			if id == "" {
				if dep.Id, err = deriveDeploymentID(ctx, api.models, name, dep.Provider); err != nil {
					return err
				}
			}
			resp, err := api.models.AddDeployment(ctx, &tollgatev1.AddDeploymentRequest{Model: name, Deployment: dep})
			if err != nil {
				return err
			}
			return a.printRoute(fmt.Sprintf("Added deployment %s to model %s.", dep.Id, name), resp.GetRoute())
		}),
	}
	d.register(cmd, true)
	cmd.Flags().StringVar(&id, "deployment", "", "deployment id, unique within the route (default: derived from the provider)")
	_ = cmd.MarkFlagRequired("provider")
	return cmd
}

// deployment builds the Deployment for model add from the flags.
func (d *deploymentFlags) deployment(f *pflag.FlagSet, name string) (*tollgatev1.Deployment, error) {
	if err := checkProvider(d.provider); err != nil {
		return nil, err
	}
	dep := &tollgatev1.Deployment{
		Provider:      d.provider,
		BaseUrl:       d.baseURL,
		UpstreamModel: d.upstreamModel,
		Credential:    d.credential,
		Weight:        d.weight,
		Priority:      d.priority,
	}
	if dep.UpstreamModel == "" {
		dep.UpstreamModel = name
	}
	switch {
	case dep.BaseUrl == "" && d.provider == "openai":
		dep.BaseUrl = openAIBaseURL
	case dep.BaseUrl == "" && d.provider != "demo":
		return nil, usageErrorf("--base-url is required for provider %s, e.g. http://127.0.0.1:8000/v1", d.provider)
	case dep.BaseUrl != "":
		u, err := checkBaseURL(dep.BaseUrl)
		if err != nil {
			return nil, err
		}
		dep.BaseUrl = u
	}
	if f.Changed("upstream-timeout") {
		ms, err := timeoutMillis(d.timeout)
		if err != nil {
			return nil, err
		}
		dep.TimeoutMs = ms
	}
	price, err := d.price(f)
	if err != nil {
		return nil, err
	}
	dep.Price = price
	if dep.Limits, err = d.limits.create(); err != nil {
		return nil, err
	}
	return dep, nil
}

// deriveDeploymentID picks the provider name, or provider-2, provider-3 ...
// when taken in the route. AddDeployment still rejects a concurrent clash.
func deriveDeploymentID(ctx context.Context, models tollgatev1.ModelServiceClient, model, provider string) (string, error) {
	resp, err := models.GetModel(ctx, &tollgatev1.GetModelRequest{Model: model})
	if status.Code(err) == codes.NotFound {
		return provider, nil
	}
	if err != nil {
		return "", err
	}
	taken := map[string]bool{}
	for _, d := range resp.GetRoute().GetDeployments() {
		taken[d.GetId()] = true
	}
	id := provider
	for n := 2; taken[id]; n++ {
		id = provider + "-" + strconv.Itoa(n)
	}
	return id, nil
}

func (a *app) modelUpdateCommand() *cobra.Command {
	var (
		d  = newDeploymentFlags()
		id string
	)
	cmd := &cobra.Command{
		Use:   "update NAME [--deployment ID]",
		Short: "Change one deployment of a model route",
		Long: `Change settings of one deployment. Only the flags you give are sent;
everything else stays as it is. --deployment may be left out when the route
has exactly one deployment. Use --credential "" to stop sending a credential
and --upstream-timeout 0 to go back to the node's default timeout.

Rate limits are replaced as a whole: --rpm, --tpm and --max-parallel you
leave out keep their current values, so --rpm 600 alone changes only the
requests per minute; 0 removes that one limit. --no-limits removes them all.`,
		Example: `  tollctl model update gpt-4o --deployment openai --weight 3 --priority 1
  tollctl model update llama --base-url http://10.0.0.7:8000/v1 --upstream-timeout 90s
  tollctl model update gpt-4o --deployment openai --rpm 1000 --max-parallel 0
  tollctl model update llama --no-limits`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			req, err := d.update(cmd.Flags(), args[0])
			if err != nil {
				return err
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			req.DeploymentId = id
			// Limits left out are taken from the current deployment.
			var cur *tollgatev1.RateLimits
			if id == "" || d.limits.needCurrent(cmd.Flags()) {
				dep, err := findDeployment(ctx, api.models, req.Model, id)
				if err != nil {
					return err
				}
				req.DeploymentId, cur = dep.GetId(), dep.GetLimits()
			}
			req.Limits = d.limits.update(cmd.Flags(), cur)
			resp, err := api.models.UpdateDeployment(ctx, req)
			if err != nil {
				return err
			}
			return a.printRoute(fmt.Sprintf("Updated deployment %s of model %s.", req.DeploymentId, req.Model), resp.GetRoute())
		}),
	}
	d.register(cmd, false)
	cmd.Flags().StringVar(&id, "deployment", "", "id of the deployment to change (default: the route's only deployment)")
	return cmd
}

// update builds an UpdateDeploymentRequest holding only the changed flags,
// without the limits, which may need the current deployment.
func (d *deploymentFlags) update(f *pflag.FlagSet, model string) (*tollgatev1.UpdateDeploymentRequest, error) {
	req := &tollgatev1.UpdateDeploymentRequest{Model: model}
	if f.Changed("provider") {
		if err := checkProvider(d.provider); err != nil {
			return nil, err
		}
		req.Provider = &d.provider
	}
	if f.Changed("base-url") {
		u, err := checkBaseURL(d.baseURL)
		if err != nil {
			return nil, err
		}
		req.BaseUrl = &u
	}
	if f.Changed("upstream-model") {
		req.UpstreamModel = &d.upstreamModel
	}
	if f.Changed("credential") {
		req.Credential = &d.credential
	}
	if f.Changed("weight") {
		req.Weight = &d.weight
	}
	if f.Changed("priority") {
		req.Priority = &d.priority
	}
	if f.Changed("upstream-timeout") {
		ms, err := timeoutMillis(d.timeout)
		if err != nil {
			return nil, err
		}
		req.TimeoutMs = &ms
	}
	if err := d.limits.check(); err != nil {
		return nil, err
	}
	if req.Provider == nil && req.BaseUrl == nil && req.UpstreamModel == nil && req.Credential == nil &&
		req.Weight == nil && req.Priority == nil && req.TimeoutMs == nil && !d.limits.none && !d.limits.changed(f) {
		return nil, usageErrorf("nothing to update: give at least one of --provider, --base-url, --upstream-model, --credential, --weight, --priority, --upstream-timeout, --rpm, --tpm, --max-parallel, --no-limits")
	}
	return req, nil
}

// findDeployment returns deployment id of a route, or with id "" the
// route's single deployment.
func findDeployment(ctx context.Context, models tollgatev1.ModelServiceClient, model, id string) (*tollgatev1.Deployment, error) {
	resp, err := models.GetModel(ctx, &tollgatev1.GetModelRequest{Model: model})
	if err != nil {
		return nil, err
	}
	deps := resp.GetRoute().GetDeployments()
	if id != "" {
		for _, d := range deps {
			if d.GetId() == id {
				return d, nil
			}
		}
		return nil, status.Errorf(codes.NotFound, "model %s has no deployment %s", model, id)
	}
	if len(deps) == 1 {
		return deps[0], nil
	}
	ids := make([]string, 0, len(deps))
	for _, d := range deps {
		ids = append(ids, d.GetId())
	}
	return nil, usageErrorf("model %s has %d deployments (%s): choose one with --deployment", model, len(deps), strings.Join(ids, ", "))
}

func checkProvider(p string) error {
	if !slices.Contains(providers, p) {
		return usageErrorf("invalid --provider %q: use one of %s", p, strings.Join(providers, ", "))
	}
	return nil
}

// checkBaseURL requires an absolute http(s) URL and drops a trailing slash.
func checkBaseURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageErrorf("invalid --base-url %q: want an http(s) URL such as http://127.0.0.1:8000/v1", s)
	}
	return strings.TrimRight(s, "/"), nil
}

func hasVersionPath(base string) bool {
	u, err := url.Parse(base)
	return err == nil && strings.Trim(u.Path, "/") != ""
}

// timeoutMillis converts --upstream-timeout to whole milliseconds.
func timeoutMillis(s string) (uint32, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, &usageError{msg: "--upstream-timeout: " + err.Error()}
	}
	if d != 0 && d < time.Millisecond || d.Milliseconds() > math.MaxUint32 {
		return 0, usageErrorf("--upstream-timeout %s is out of range (1ms to about 49 days, or 0 for the default)", s)
	}
	return uint32(d.Milliseconds()), nil
}
