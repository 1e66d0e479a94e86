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
	"github.com/tollgate/tollgate/routing"
)

// providerNames are the accepted --provider values: the provider kinds,
// then the OpenAI-compatible presets.
func providerNames() []string {
	return append(slices.Clone(routing.Providers), routing.PresetNames()...)
}

// deploymentFlags are the per-deployment settings shared by add and update.
type deploymentFlags struct {
	provider, baseURL, upstreamModel, credential string
	weight, priority                             uint32
	timeout, firstTokenTimeout                   string
	options                                      []string
	clearOptions                                 bool // model update only
	// Prices in dollars per million tokens; model add only.
	inputPrice, outputPrice, cachedPrice, cacheWritePrice string
	priceTiers                                            []string
	limits                                                limitFlags
}

func newDeploymentFlags() *deploymentFlags {
	return &deploymentFlags{limits: limitFlags{what: "deployment"}}
}

// register adds the flags; add selects the help texts for model add, where
// unset flags get defaults, rather than model update, where they stay as is.
func (d *deploymentFlags) register(cmd *cobra.Command, add bool) {
	f := cmd.Flags()
	baseURL := "API root including the version path, e.g. http://127.0.0.1:8000/v1; required for openai-compatible and " +
		"azure-openai (https://NAME.openai.azure.com), defaulted for the other providers (default for openai: " + routing.OpenAIBaseURL + ")"
	upstream := `model name sent upstream (for azure-openai: the Azure deployment name); "*" on a wildcard route sends the name the client asked for (default: NAME)`
	timeout := "upstream request timeout for this deployment, e.g. 30s or 2m (default: the node's)"
	firstToken := "for streams: the longest wait for the first token before the deployment counts as failed and the next one is tried, e.g. 5s (default: no limit beyond the upstream timeout)"
	option := "provider option key=value; repeat for more: api_version (azure-openai), responses (openai, azure-openai, openai-compatible), region and prompt_caching (bedrock), vertex_project and vertex_location (gemini on Vertex AI)"
	if !add {
		baseURL = `new API root including the version path, e.g. http://127.0.0.1:8000/v1; "" for the provider's default`
		upstream = `new model name sent upstream ("*": the name the client asked for)`
		timeout = "new upstream request timeout, e.g. 30s or 2m; 0 goes back to the node's default"
		firstToken = "new longest wait for the first token of a stream, e.g. 5s; 0 removes the limit"
		option = "provider option key=value; repeat for more. Replaces all of the deployment's options: the ones not given are removed"
	}
	f.StringVar(&d.provider, "provider", "", "provider kind: "+strings.Join(routing.Providers, ", ")+
		"; or a preset (a known OpenAI-compatible server): "+strings.Join(routing.PresetNames(), ", "))
	f.StringVar(&d.baseURL, "base-url", "", baseURL)
	f.StringVar(&d.upstreamModel, "upstream-model", "", upstream)
	f.StringVar(&d.credential, "credential", "", "name of the stored credential sent upstream (see tollctl credential); empty for none")
	f.Uint32Var(&d.weight, "weight", 0, "relative share of traffic among deployments of the same priority (0 means 1)")
	f.Uint32Var(&d.priority, "priority", 0, "lower is preferred; higher priorities serve only when all lower ones failed")
	f.StringVar(&d.timeout, "upstream-timeout", "", timeout)
	f.StringVar(&d.firstTokenTimeout, "first-token-timeout", "", firstToken)
	f.StringArrayVar(&d.options, "option", nil, option)
	if add {
		f.StringVar(&d.inputPrice, "input-price", "", "price override: dollars per million prompt tokens, e.g. 2.50 (default: the built-in price of the upstream model, see model prices)")
		f.StringVar(&d.outputPrice, "output-price", "", "price override: dollars per million completion tokens, e.g. 10; needed with --input-price")
		f.StringVar(&d.cachedPrice, "cached-price", "", "price override: dollars per million prompt tokens read from the provider's cache, e.g. 1.25 (default: the input price)")
		f.StringVar(&d.cacheWritePrice, "cache-write-price", "", "price override: dollars per million prompt tokens written to the provider's cache, e.g. 3.75 (default: the input price)")
		f.StringArrayVar(&d.priceTiers, "price-tier", nil, "price override for long prompts: above=TOKENS,input=$,output=$[,cached=$][,cache-write=$]; "+
			"a call whose prompt has more than TOKENS tokens pays all its tokens at these rates; cached= and cache-write= are needed when "+
			"--cached-price and --cache-write-price are set (default: the tier's input price); repeat for more tiers")
	} else {
		f.BoolVar(&d.clearOptions, "clear-options", false, "remove all of the deployment's provider options")
		cmd.MarkFlagsMutuallyExclusive("option", "clear-options")
	}
	d.limits.register(cmd, !add)
}

// price builds the price override of model add, nil without price flags.
func (d *deploymentFlags) price(f *pflag.FlagSet) (*tollgatev1.Price, error) {
	in, out := f.Changed("input-price"), f.Changed("output-price")
	extra := f.Changed("cached-price") || f.Changed("cache-write-price") || f.Changed("price-tier")
	if !in && !out && !extra {
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
	if f.Changed("cached-price") {
		if p.CachedInputMicrosPerMtok, err = moneyFlag("cached-price", d.cachedPrice, microDecimals); err != nil {
			return nil, err
		}
	}
	if f.Changed("cache-write-price") {
		if p.CacheWriteMicrosPerMtok, err = moneyFlag("cache-write-price", d.cacheWritePrice, microDecimals); err != nil {
			return nil, err
		}
	}
	for _, s := range d.priceTiers {
		t, err := parsePriceTier(s)
		if err != nil {
			return nil, err
		}
		if n := len(p.Tiers); n > 0 && t.GetAbovePromptTokens() <= p.Tiers[n-1].GetAbovePromptTokens() {
			return nil, usageErrorf("invalid --price-tier %q: tiers must be given in ascending order of above=", s)
		}
		if p.CachedInputMicrosPerMtok != 0 && t.CachedInputMicrosPerMtok == 0 {
			return nil, usageErrorf("invalid --price-tier %q: give cached=, as --cached-price is set (without it, cached tokens of a long prompt would cost the tier's input price)", s)
		}
		if p.CacheWriteMicrosPerMtok != 0 && t.CacheWriteMicrosPerMtok == 0 {
			return nil, usageErrorf("invalid --price-tier %q: give cache-write=, as --cache-write-price is set", s)
		}
		p.Tiers = append(p.Tiers, t)
	}
	return p, nil
}

// parsePriceTier reads a --price-tier value:
// above=TOKENS,input=$,output=$[,cached=$][,cache-write=$].
func parsePriceTier(s string) (*tollgatev1.PriceTier, error) {
	bad := func(format string, args ...any) error {
		return usageErrorf("invalid --price-tier %q: %s", s, fmt.Sprintf(format, args...))
	}
	t := &tollgatev1.PriceTier{}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok {
			return nil, bad("want above=TOKENS,input=$,output=$[,cached=$][,cache-write=$]")
		}
		if seen[k] {
			return nil, bad("%s given twice", k)
		}
		seen[k] = true
		var dst *int64
		switch k {
		case "above":
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n <= 0 {
				return nil, bad("above wants a positive number of prompt tokens, e.g. 200000")
			}
			t.AbovePromptTokens = n
			continue
		case "input":
			dst = &t.InputMicrosPerMtok
		case "output":
			dst = &t.OutputMicrosPerMtok
		case "cached":
			dst = &t.CachedInputMicrosPerMtok
		case "cache-write":
			dst = &t.CacheWriteMicrosPerMtok
		default:
			return nil, bad("unknown field %q; the fields are above, input, output, cached, cache-write", k)
		}
		n, err := parseFixed(v, microDecimals)
		if err != nil {
			return nil, bad("%s: %v", k, err)
		}
		*dst = n
	}
	for _, k := range []string{"above", "input", "output"} {
		if !seen[k] {
			return nil, bad("%s is required", k)
		}
	}
	return t, nil
}

func (a *app) modelAddCommand() *cobra.Command {
	var (
		d  = newDeploymentFlags()
		id string
	)
	cmd := &cobra.Command{
		Use:   "add NAME --provider P [--base-url URL] [--option KEY=VALUE]...",
		Short: "Add a deployment to a model route, creating the route if needed",
		Long:  modelAddHelp(),
		Example: `  tollctl model add gpt-4o --provider openai --credential openai
  tollctl model add claude-sonnet-4 --provider anthropic --upstream-model claude-sonnet-4-20250514 --credential anthropic
  tollctl model add 'claude-*' --provider anthropic --upstream-model '*' --credential anthropic
  tollctl model add gemini-2.5-flash --provider gemini --credential gemini
  tollctl model add gemini-2.5-pro --provider gemini --option vertex_project=my-project \
      --option vertex_location=europe-west4 --credential vertex-token
  tollctl model add gpt-4o --provider azure-openai --base-url https://myresource.openai.azure.com \
      --upstream-model my-gpt-4o --option api_version=2024-10-21 --credential azure
  tollctl model add claude-sonnet-4 --provider bedrock --option region=us-east-1 \
      --upstream-model us.anthropic.claude-sonnet-4-20250514-v1:0 --credential aws
  tollctl model add llama-3.3-70b --provider groq --upstream-model llama-3.3-70b-versatile --credential groq
  tollctl model add llama --provider openai-compatible --base-url http://127.0.0.1:8000/v1 \
      --upstream-model meta-llama/Llama-3.1-8B --deployment local-vllm --weight 3 --upstream-timeout 2m
  tollctl model add echo --provider demo
  tollctl model add llama --provider vllm --input-price 0.20 --output-price 0.60
  tollctl model add gpt-4o --provider openai --credential openai --rpm 500 --tpm 30000 --max-parallel 20 \
      --first-token-timeout 5s`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			dep, err := d.deployment(cmd.Flags(), name)
			if err != nil {
				return err
			}
			if want := versionPath(dep.Provider, dep.Options); dep.BaseUrl != "" && want != "" && !hasVersionPath(dep.BaseUrl) {
				fmt.Fprintf(a.stderr, "note: --base-url %s has no path; the API root of %s usually ends in %s\n", dep.BaseUrl, dep.Provider, want)
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

// modelAddHelp is the long help of model add.
func modelAddHelp() string {
	return `Add a deployment serving the public model NAME. The route is created if it
does not exist yet. NAME may contain '*' wildcards (quote it for the shell,
e.g. 'claude-*'): such a route serves every model name it matches that no
other route or alias claims, and a deployment with --upstream-model '*' sends
upstream the name the client asked for.

--provider is the upstream's API: openai; openai-compatible (vLLM, Ollama
and other servers speaking the OpenAI API); azure-openai; anthropic; gemini
(Google AI Studio, or Vertex AI with --option vertex_project=...); bedrock
(AWS, with --option region=...); or demo, which answers inside the gateway
without any upstream. A preset stands for a known OpenAI-compatible server:
the deployment is stored as openai-compatible with the preset's base URL and
the option preset=NAME. The presets are:
` + wrapList(routing.PresetNames(), 78, "  ") + `

--base-url is the API root including the version path, e.g.
http://127.0.0.1:8000/v1. It is needed for openai-compatible and for
azure-openai (the resource endpoint, https://NAME.openai.azure.com). The
gateway fills in a default for the others: ` + routing.OpenAIBaseURL + `
for openai, ` + routing.AnthropicBaseURL + ` for anthropic, AI Studio or the
Vertex AI endpoint of vertex_location for gemini, the endpoint of the region
for bedrock, and the preset's own for a preset.

--option sets a provider option as key=value; repeat it for more:
  azure-openai  api_version (default ` + routing.AzureAPIVersion + `)
  openai, azure-openai, openai-compatible
                responses on|off: pass /v1/responses through to the
                deployment untouched (default: on for openai and
                azure-openai, off for openai-compatible: set it for vLLM)
  bedrock       region (required), e.g. us-east-1; prompt_caching on|off
                (default: on for the models Bedrock caches prompts for:
                Claude 3.7 Sonnet, 3.5 Haiku, 4 and later, Nova)
  gemini        vertex_project: call Vertex AI instead of AI Studio;
                vertex_location (default us-central1)

The credential (see tollctl credential) is the provider's API key; for
gemini on Vertex AI an OAuth access token; for bedrock the AWS access key
as ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN].

Without --deployment, the deployment id is the --provider value, with -2,
-3 ... appended if that id is already taken in the route. --upstream-model
defaults to NAME; for azure-openai it is the name of the Azure deployment.

--first-token-timeout bounds the wait for the first token of a stream:
after it the deployment counts as failed and the next one is tried.

Spend is counted with the built-in price of the upstream model when Tollgate
knows it. --input-price and --output-price override it, in dollars per
million tokens, up to 6 decimals; use them for self-hosted or unknown
models, or negotiated prices. --cached-price and --cache-write-price price
prompt tokens read from and written to the provider's prompt cache
(default: the input price). --price-tier adds long-context rates: with
--price-tier above=200000,input=6,output=22.50 a call whose prompt has more
than 200,000 tokens pays all its tokens at $6 and $22.50. The price cannot be
changed by model update: remove and add the deployment again. See
tollctl model prices for the price each deployment uses.

--rpm, --tpm and --max-parallel protect the upstream, cluster-wide: requests
per minute, tokens (prompt plus completion) per minute and requests in
flight at once. A deployment at one of its limits is skipped in favour of
the others; 0 means unlimited.

Routing options of the route (strategy, fallbacks, aliases) are set with
tollctl model route; tollctl model test sends a test request.`
}

// deployment builds the Deployment for model add from the flags.
func (d *deploymentFlags) deployment(f *pflag.FlagSet, name string) (*tollgatev1.Deployment, error) {
	if err := checkProvider(d.provider); err != nil {
		return nil, err
	}
	options, err := parseOptions(d.options)
	if err != nil {
		return nil, err
	}
	dep := &tollgatev1.Deployment{
		Provider:      d.provider,
		BaseUrl:       d.baseURL,
		UpstreamModel: d.upstreamModel,
		Credential:    d.credential,
		Weight:        d.weight,
		Priority:      d.priority,
		Options:       options,
	}
	if dep.UpstreamModel == "" {
		dep.UpstreamModel = name
	}
	if dep.BaseUrl == "" {
		if err := needBaseURL(d.provider); err != nil {
			return nil, err
		}
	} else {
		if dep.BaseUrl, err = checkBaseURL(dep.BaseUrl); err != nil {
			return nil, err
		}
	}
	if f.Changed("upstream-timeout") {
		if dep.TimeoutMs, err = timeoutMillis("upstream-timeout", d.timeout); err != nil {
			return nil, err
		}
	}
	if f.Changed("first-token-timeout") {
		if dep.FirstTokenTimeoutMs, err = timeoutMillis("first-token-timeout", d.firstTokenTimeout); err != nil {
			return nil, err
		}
	}
	if dep.Price, err = d.price(f); err != nil {
		return nil, err
	}
	if dep.Limits, err = d.limits.create(); err != nil {
		return nil, err
	}
	return dep, nil
}

// needBaseURL fails for the providers that have no default base URL.
// Other missing settings (such as bedrock's region) are left to the
// server, which names them.
func needBaseURL(provider string) error {
	switch provider {
	case routing.ProviderOpenAICompatible:
		return usageErrorf("--base-url is required for provider %s: the API root including /v1, e.g. http://127.0.0.1:8000/v1; or name a preset as the --provider: %s",
			provider, strings.Join(routing.PresetNames(), ", "))
	case routing.ProviderAzureOpenAI:
		return usageErrorf("--base-url is required for provider %s: the resource endpoint, e.g. https://NAME.openai.azure.com", provider)
	}
	return nil
}

// versionPath returns the path the API root of provider usually ends in,
// such as /v1, or "" when it has none (azure-openai, bedrock, some presets)
// or the provider takes no base URL.
func versionPath(provider string, options map[string]string) string {
	switch provider {
	case routing.ProviderOpenAI, routing.ProviderOpenAICompatible, routing.ProviderAnthropic:
		return "/v1"
	case routing.ProviderGemini:
		if options["vertex_project"] != "" {
			return "/v1"
		}
		return "/v1beta"
	}
	if p, ok := routing.Presets[provider]; ok {
		if u, err := url.Parse(p.BaseURL); err == nil {
			return strings.TrimRight(u.Path, "/")
		}
	}
	return ""
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
has exactly one deployment. Use --credential "" to stop sending a credential,
--upstream-timeout 0 to go back to the node's default timeout and
--first-token-timeout 0 to remove the first-token limit.

--base-url "" goes back to the provider's default base URL. The base URL is
not changed by --provider or --option: after switching the provider, or the
region of a bedrock deployment, add --base-url "" (or a new URL) so that it
matches.

--option replaces all of the deployment's provider options: the ones you
leave out are removed, including preset=NAME, which records the preset a
deployment was made from: repeat it to keep it. --clear-options removes all
options.

Rate limits are replaced as a whole: --rpm, --tpm and --max-parallel you
leave out keep their current values, so --rpm 600 alone changes only the
requests per minute; 0 removes that one limit. --no-limits removes them all.`,
		Example: `  tollctl model update gpt-4o --deployment openai --weight 3 --priority 1
  tollctl model update llama --base-url http://10.0.0.7:8000/v1 --upstream-timeout 90s --first-token-timeout 10s
  tollctl model update gpt-4o --deployment azure-openai --option api_version=2025-01-01-preview
  tollctl model update claude-sonnet-4 --deployment bedrock --option region=eu-central-1 --base-url ""
  tollctl model update gpt-4o --deployment openai --rpm 1000 --max-parallel 0
  tollctl model update llama --no-limits --first-token-timeout 0`,
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
		u := "" // the provider's default
		if d.baseURL != "" {
			var err error
			if u, err = checkBaseURL(d.baseURL); err != nil {
				return nil, err
			}
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
		ms, err := timeoutMillis("upstream-timeout", d.timeout)
		if err != nil {
			return nil, err
		}
		req.TimeoutMs = &ms
	}
	if f.Changed("first-token-timeout") {
		ms, err := timeoutMillis("first-token-timeout", d.firstTokenTimeout)
		if err != nil {
			return nil, err
		}
		req.FirstTokenTimeoutMs = &ms
	}
	if f.Changed("option") {
		options, err := parseOptions(d.options)
		if err != nil {
			return nil, err
		}
		req.Options, req.SetOptions = options, true
	}
	if d.clearOptions {
		req.Options, req.SetOptions = map[string]string{}, true
	}
	if err := d.limits.check(); err != nil {
		return nil, err
	}
	if req.Provider == nil && req.BaseUrl == nil && req.UpstreamModel == nil && req.Credential == nil &&
		req.Weight == nil && req.Priority == nil && req.TimeoutMs == nil && req.FirstTokenTimeoutMs == nil &&
		!req.SetOptions && !d.limits.none && !d.limits.changed(f) {
		return nil, usageErrorf("nothing to update: give at least one of --provider, --base-url, --upstream-model, --credential, --weight, --priority, --upstream-timeout, --first-token-timeout, --option, --clear-options, --rpm, --tpm, --max-parallel, --no-limits")
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
	if !slices.Contains(providerNames(), p) {
		return usageErrorf("invalid --provider %q: use one of %s; or a preset: %s", p,
			strings.Join(routing.Providers, ", "), strings.Join(routing.PresetNames(), ", "))
	}
	return nil
}

// parseOptions turns repeated --option key=value flags into a map; nil
// when there are none. An empty value is kept: the server decides whether
// the option may be empty.
func parseOptions(pairs []string) (map[string]string, error) {
	return parsePairs("--option", "region=us-east-1", pairs, true)
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

// timeoutMillis converts the duration of --flag to whole milliseconds.
func timeoutMillis(flag, s string) (uint32, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, &usageError{msg: "--" + flag + ": " + err.Error()}
	}
	if d != 0 && d < time.Millisecond || d.Milliseconds() > math.MaxUint32 {
		return 0, usageErrorf("--%s %s is out of range (1ms to about 49 days, or 0)", flag, s)
	}
	return uint32(d.Milliseconds()), nil
}

// wrapList joins items with ", " into lines that start with indent and stay
// within width columns.
func wrapList(items []string, width int, indent string) string {
	var b strings.Builder
	line := indent
	for i, s := range items {
		if i < len(items)-1 {
			s += ","
		}
		switch {
		case line == indent:
			line += s
		case len(line)+1+len(s) > width:
			b.WriteString(line + "\n")
			line = indent + s
		default:
			line += " " + s
		}
	}
	b.WriteString(line)
	return b.String()
}
