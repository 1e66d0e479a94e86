package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func (a *app) modelCommand() *cobra.Command {
	cmd := groupCommand("model",
		"Manage model routes and their deployments",
		`A model route maps the public model name clients ask for to one or more
deployments: upstream endpoints with a provider (OpenAI, Anthropic, Gemini,
Azure OpenAI, Bedrock or any OpenAI-compatible server), base URL, upstream
model name and credential. Deployments of the same priority share traffic
by weight; higher priorities are used only when the lower ones fail. A
route name may contain '*' wildcards to serve a whole family of models.

A route's routing options (tollctl model route) choose the strategy among
deployments, the fallback models tried when all deployments fail or the
prompt is too long, other names (aliases) for the route, and the attempts
per request. tollctl model test sends a test request through a route.`,
		`  tollctl model add gpt-4o --provider openai --credential openai
  tollctl model add 'claude-*' --provider anthropic --upstream-model '*' --credential anthropic
  tollctl model add llama --provider openai-compatible --base-url http://127.0.0.1:8000/v1 --upstream-model meta-llama/Llama-3.1-8B
  tollctl model route gpt-4o --strategy latency --fallback claude-sonnet-4 --alias gpt4
  tollctl model test gpt-4o
  tollctl model list
  tollctl model prices`)
	cmd.AddCommand(a.modelAddCommand(), a.modelUpdateCommand(), a.modelRemoveCommand(),
		a.modelListCommand(), a.modelGetCommand(), a.modelRouteCommand(), a.modelTestCommand(),
		a.modelPricesCommand())
	return cmd
}

func (a *app) modelRemoveCommand() *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "remove NAME [--deployment ID]",
		Short: "Remove a deployment, or a whole model route",
		Long: `Without --deployment, delete the model route NAME with all its deployments.
With --deployment, remove only that deployment; a route left without
deployments is deleted too. With -o json the remaining route is printed, or
null when the route is gone.`,
		Example: `  tollctl model remove gpt-4o --deployment openai-2
  tollctl model remove gpt-4o`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			if id == "" {
				if _, err := api.models.DeleteModel(ctx, &tollgatev1.DeleteModelRequest{Model: name}); err != nil {
					return err
				}
				return a.printRoute(fmt.Sprintf("Deleted model %s.", name), nil)
			}
			resp, err := api.models.RemoveDeployment(ctx, &tollgatev1.RemoveDeploymentRequest{Model: name, DeploymentId: id})
			if err != nil {
				return err
			}
			msg := fmt.Sprintf("Removed deployment %s from model %s.", id, name)
			if resp.GetRoute() == nil {
				msg += " It was the last one, so the model is gone."
			}
			return a.printRoute(msg, resp.GetRoute())
		}),
	}
	cmd.Flags().StringVar(&id, "deployment", "", "remove only this deployment instead of the whole route")
	return cmd
}

func (a *app) modelListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List model routes, one row per deployment",
		Long: `List all model routes with their deployments, one table row per
deployment. LIMITS are a deployment's rate limits, e.g.
"600rpm 100000tpm 8par" (requests and tokens per minute, requests in
flight), "-" for none. FIRST-TOKEN is the longest wait for the first token
of a stream ("-": no limit of its own), OPTIONS the provider options.

A second table shows the routing options of the routes that have any (see
tollctl model route): STRATEGY, FALLBACKS, CONTEXT-FALLBACKS, ALIASES and
MAX-ATTEMPTS.

With -o json, print an array of routes; each has its routing options in
"options" and its deployments in "deployments".`,
		Example: `  tollctl model list
  tollctl model list -o json | jq -r '.[].name'
  tollctl model list -o json | jq -r '.[] | select(.options.fallbacks | length > 0) | .name'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.models.ListModels(ctx, &tollgatev1.ListModelsRequest{})
			if err != nil {
				return err
			}
			routes := resp.GetRoutes()
			if a.jsonOutput() {
				for _, r := range routes {
					fillRouteOptions(r)
				}
				raw, err := protoJSONList(routes)
				if err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			if len(routes) == 0 {
				fmt.Fprintln(a.stdout, "No models.")
				return nil
			}
			tw := newTable(a.stdout)
			row(tw, "MODEL", "DEPLOYMENT", "PROVIDER", "UPSTREAM-MODEL", "BASE-URL", "WEIGHT", "PRIORITY", "CREDENTIAL", "FIRST-TOKEN",
				"OPTIONS", "LIMITS")
			for _, r := range routes {
				for _, d := range r.GetDeployments() {
					row(tw, r.GetName(), d.GetId(), d.GetProvider(), d.GetUpstreamModel(), orDash(d.GetBaseUrl()),
						fmtWeight(d.GetWeight()), strconv.FormatUint(uint64(d.GetPriority()), 10), orDash(d.GetCredential()),
						fmtFirstToken(d.GetFirstTokenTimeoutMs()), fmtOptions(d.GetOptions()), fmtLimits(d.GetLimits()))
				}
				if len(r.GetDeployments()) == 0 {
					row(tw, r.GetName(), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-")
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			first := true
			for _, r := range routes {
				o := r.GetOptions()
				if !hasRouteOptions(o) {
					continue
				}
				if first {
					fmt.Fprintln(a.stdout)
					row(tw, "MODEL", "STRATEGY", "FALLBACKS", "CONTEXT-FALLBACKS", "ALIASES", "MAX-ATTEMPTS")
					first = false
				}
				row(tw, r.GetName(), fmtStrategy(o.GetStrategy()), fmtNames(o.GetFallbacks(), ","),
					fmtNames(o.GetContextFallbacks(), ","), fmtNames(o.GetAliases(), ","), fmtAttempts(o.GetMaxAttempts()))
			}
			return tw.Flush()
		}),
	}
}

func (a *app) modelGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show one model route and its deployments",
		Long: `Show a model route: its routing options (see tollctl model route) and its
deployments with all their settings, including their rate limits (LIMITS,
e.g. "600rpm 100000tpm 8par", "-" for none), the longest wait for the first
token of a stream (FIRST-TOKEN, "-" for no limit of its own) and the
provider options (OPTIONS).`,
		Example: `  tollctl model get gpt-4o
  tollctl model get gpt-4o -o json | jq .options`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.models.GetModel(ctx, &tollgatev1.GetModelRequest{Model: args[0]})
			if err != nil {
				return err
			}
			return a.printRoute("", resp.GetRoute())
		}),
	}
}

// printRoute prints a route (JSON: the route object or null), preceded in
// table mode by msg when it is not empty.
func (a *app) printRoute(msg string, r *tollgatev1.ModelRoute) error {
	if a.jsonOutput() {
		if r != nil {
			fillRouteOptions(r)
		}
		return a.printProto(r)
	}
	if msg != "" {
		fmt.Fprintln(a.stdout, msg)
	}
	if r == nil {
		return nil
	}
	if msg != "" {
		fmt.Fprintln(a.stdout)
	}
	fmt.Fprintf(a.stdout, "Model %s (created %s, updated %s)\n", r.GetName(), fmtTime(r.GetCreatedAt()), fmtTime(r.GetUpdatedAt()))
	o := r.GetOptions()
	strategy := fmtStrategy(o.GetStrategy())
	if o.GetStrategy() == "" {
		strategy += " (default)"
	}
	for _, kv := range [][2]string{
		{"Strategy:", strategy},
		{"Fallbacks:", fmtNames(o.GetFallbacks(), ", ")},
		{"Context fallbacks:", fmtNames(o.GetContextFallbacks(), ", ")},
		{"Aliases:", fmtNames(o.GetAliases(), ", ")},
		{"Max attempts:", fmtAttempts(o.GetMaxAttempts())},
	} {
		fmt.Fprintf(a.stdout, "%-20s%s\n", kv[0], kv[1])
	}
	fmt.Fprintln(a.stdout)
	tw := newTable(a.stdout)
	row(tw, "DEPLOYMENT", "PROVIDER", "UPSTREAM-MODEL", "BASE-URL", "WEIGHT", "PRIORITY", "TIMEOUT", "FIRST-TOKEN", "CREDENTIAL",
		"OPTIONS", "LIMITS")
	for _, d := range r.GetDeployments() {
		row(tw, d.GetId(), d.GetProvider(), d.GetUpstreamModel(), orDash(d.GetBaseUrl()), fmtWeight(d.GetWeight()),
			strconv.FormatUint(uint64(d.GetPriority()), 10), fmtTimeout(d.GetTimeoutMs()), fmtFirstToken(d.GetFirstTokenTimeoutMs()),
			orDash(d.GetCredential()), fmtOptions(d.GetOptions()), fmtLimits(d.GetLimits()))
	}
	return tw.Flush()
}

// fillRouteOptions gives a route without routing options an empty set, so
// that in JSON every route has the same keys.
func fillRouteOptions(r *tollgatev1.ModelRoute) {
	if r.GetOptions() == nil {
		r.Options = &tollgatev1.RouteOptions{}
	}
}

func hasRouteOptions(o *tollgatev1.RouteOptions) bool {
	return o.GetStrategy() != "" || len(o.GetFallbacks()) > 0 || len(o.GetContextFallbacks()) > 0 ||
		len(o.GetAliases()) > 0 || o.GetMaxAttempts() != 0
}

// fmtStrategy shows the routing strategy; unset is the default, weighted.
func fmtStrategy(s string) string {
	if s == "" {
		return "weighted"
	}
	return s
}

func fmtAttempts(n uint32) string {
	if n == 0 {
		return "default"
	}
	return strconv.FormatUint(uint64(n), 10)
}

// fmtNames joins model names with sep, "-" for none.
func fmtNames(names []string, sep string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, sep)
}

// fmtOptions renders provider options as sorted key=value pairs joined by
// commas, "-" for none.
func fmtOptions(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// fmtFirstToken shows a first-token timeout, "-" for none.
func fmtFirstToken(ms uint32) string {
	if ms == 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func fmtWeight(w uint32) string {
	if w == 0 {
		w = 1
	}
	return strconv.FormatUint(uint64(w), 10)
}

func fmtTimeout(ms uint32) string {
	if ms == 0 {
		return "default"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func (a *app) modelPricesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "prices [MODEL]",
		Short: "Show the price each deployment is charged at",
		Long: `Show the price that applies to every deployment, or to the deployments of
MODEL: in dollars per million prompt (INPUT), completion (OUTPUT), cached
prompt (CACHED: read from the provider's prompt cache) and cache-write
(written to it) tokens. LONG-PROMPT lists long-context rates: ">200000:
$6.00/$22.50" means a call whose prompt has more than 200,000 tokens pays
all its input and output tokens at $6.00 and $22.50 (its cache rates are in
the JSON output). SOURCE is "override" for a price set with model add
--input-price, "built-in PROVIDER/MODEL" for Tollgate's own price list, or
"unknown": the cost of requests to such a deployment is not counted, and keys
or teams with a budget refuse them unless the budget allows unpriced models.

With -o json, print an array of rows; prices are integer micro-dollars per
million tokens (2500000 is $2.50), and price is null when unknown.`,
		Example: `  tollctl model prices
  tollctl model prices gpt-4o
  tollctl model prices -o json | jq -r '.[] | select(.price == null) | .model'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("too many arguments: expected at most MODEL")
			}
			return nil
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			req := &tollgatev1.ListPricesRequest{}
			if len(args) == 1 {
				req.Model = args[0]
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.models.ListPrices(ctx, req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				raw, err := protoJSONList(resp.GetPrices())
				if err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			if len(resp.GetPrices()) == 0 {
				fmt.Fprintln(a.stdout, "No models.")
				return nil
			}
			tw := newTable(a.stdout)
			row(tw, "MODEL", "DEPLOYMENT", "PROVIDER", "UPSTREAM-MODEL", "INPUT/MTOK", "OUTPUT/MTOK", "CACHED/MTOK", "CACHE-WRITE/MTOK", "LONG-PROMPT", "SOURCE")
			for _, p := range resp.GetPrices() {
				in, out, cached, write, long := "unknown", "unknown", "unknown", "unknown", "-"
				if pr := p.GetPrice(); pr != nil {
					in, out = fmtMicros(pr.GetInputMicrosPerMtok()), fmtMicros(pr.GetOutputMicrosPerMtok())
					cached = fmtMicros(orInput(pr.GetCachedInputMicrosPerMtok(), pr.GetInputMicrosPerMtok()))
					write = fmtMicros(orInput(pr.GetCacheWriteMicrosPerMtok(), pr.GetInputMicrosPerMtok()))
					var tiers []string
					for _, t := range pr.GetTiers() {
						tiers = append(tiers, fmt.Sprintf(">%d: %s/%s", t.GetAbovePromptTokens(),
							fmtMicros(t.GetInputMicrosPerMtok()), fmtMicros(t.GetOutputMicrosPerMtok())))
					}
					if len(tiers) > 0 {
						long = strings.Join(tiers, " ")
					}
				}
				row(tw, p.GetModel(), p.GetDeployment(), orDash(p.GetProvider()), orDash(p.GetUpstreamModel()),
					in, out, cached, write, long, orDash(p.GetSource()))
			}
			return tw.Flush()
		}),
	}
}

// orInput returns a cache rate, or the input rate when it is zero (which
// means the input rate).
func orInput(rate, input int64) int64 {
	if rate == 0 {
		return input
	}
	return rate
}
