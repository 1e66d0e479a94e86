package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// routeFlagNames are the flags of model route that change an option.
var routeFlagNames = []string{"strategy", "fallback", "no-fallbacks", "context-fallback", "no-context-fallbacks",
	"alias", "no-aliases", "max-attempts", "clear"}

// routeFlags are the flags of model route.
type routeFlags struct {
	strategy                             string
	fallbacks, contextFallbacks, aliases []string
	noFallbacks, noContextFallbacks      bool
	noAliases, clearAll                  bool
	maxAttempts                          uint32
}

func (a *app) modelRouteCommand() *cobra.Command {
	var r routeFlags
	cmd := &cobra.Command{
		Use:   "route NAME [--strategy S] [--fallback M]... [--context-fallback M]... [--alias A]... [--max-attempts N] [--clear]",
		Short: "Show or change a model route's routing options",
		Long: `Change the routing options of the model route NAME. Only the options you
give change; the others keep their current values. Without any flag, the
route is only shown.

--strategy chooses among the deployments of one priority: weighted (weighted
random, the default), least-inflight (fewest requests in flight), latency
(lowest recent latency) or cost (lowest price). --strategy "" goes back to
the default.

--fallback names a model tried when every deployment of this route failed
(after retries) or refused for quota or rate limits; --context-fallback one
tried when the prompt is too long for this route's models. Repeat them, or
separate names by commas, for several, tried in order. The fallback models
must exist.

--alias gives the route another name clients may use; repeat it or
separate names by commas for several. An alias must not be the name of
another route or alias.

A list flag you give replaces that whole list: --fallback gpt-4o-mini alone
leaves gpt-4o-mini as the only fallback. --fallback "" or --no-fallbacks
clears the fallbacks, likewise --no-context-fallbacks and --no-aliases.

--max-attempts bounds the attempts per request across this route's
deployments, including the first (at most 10); 0 uses the node's default.

--clear starts from no options at all instead of the current ones: alone,
it resets the route to the defaults; with other flags, only those are set.`,
		Example: `  tollctl model route gpt-4o
  tollctl model route gpt-4o --strategy latency --fallback gpt-4o-mini --fallback claude-sonnet-4
  tollctl model route gpt-4o --context-fallback gpt-4.1 --alias gpt4 --alias gpt-4o-latest
  tollctl model route gpt-4o --max-attempts 3
  tollctl model route gpt-4o --no-fallbacks --strategy ""
  tollctl model route gpt-4o --clear
  tollctl model route gpt-4o --alias gpt4 -o json | jq .options`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			name, f := args[0], cmd.Flags()
			changed := slices.ContainsFunc(routeFlagNames, f.Changed)
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			o := &tollgatev1.RouteOptions{}
			if !r.clearAll {
				resp, err := api.models.GetModel(ctx, &tollgatev1.GetModelRequest{Model: name})
				if err != nil {
					return err
				}
				if !changed {
					return a.printRoute("", resp.GetRoute())
				}
				if cur := resp.GetRoute().GetOptions(); cur != nil {
					o = proto.Clone(cur).(*tollgatev1.RouteOptions)
				}
			}
			r.apply(f, o)
			resp, err := api.models.SetRouteOptions(ctx, &tollgatev1.SetRouteOptionsRequest{Model: name, Options: o})
			if err != nil {
				return err
			}
			msg := fmt.Sprintf("Set the routing options of model %s.", name)
			if !hasRouteOptions(o) {
				msg = fmt.Sprintf("Reset the routing options of model %s to the defaults.", name)
			}
			return a.printRoute(msg, resp.GetRoute())
		}),
	}
	r.register(cmd)
	return cmd
}

func (r *routeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&r.strategy, "strategy", "", `how deployments of one priority are chosen: weighted, least-inflight, latency or cost; "" for the default (weighted)`)
	fl.StringSliceVar(&r.fallbacks, "fallback", nil, `model tried when all deployments failed; repeat or separate by commas for more, in order (replaces the list; "" clears it)`)
	fl.BoolVar(&r.noFallbacks, "no-fallbacks", false, "remove all fallback models")
	fl.StringSliceVar(&r.contextFallbacks, "context-fallback", nil, `model tried when the prompt is too long; repeat or separate by commas for more (replaces the list; "" clears it)`)
	fl.BoolVar(&r.noContextFallbacks, "no-context-fallbacks", false, "remove all context fallback models")
	fl.StringSliceVar(&r.aliases, "alias", nil, `another name clients may use for the route; repeat or separate by commas for more (replaces the list; "" clears it)`)
	fl.BoolVar(&r.noAliases, "no-aliases", false, "remove all aliases")
	fl.Uint32Var(&r.maxAttempts, "max-attempts", 0, "attempts per request across the route's deployments, including the first, at most 10; 0 for the node's default")
	fl.BoolVar(&r.clearAll, "clear", false, "start from no options instead of the current ones (alone: reset the route to the defaults)")
	cmd.MarkFlagsMutuallyExclusive("fallback", "no-fallbacks")
	cmd.MarkFlagsMutuallyExclusive("context-fallback", "no-context-fallbacks")
	cmd.MarkFlagsMutuallyExclusive("alias", "no-aliases")
}

// apply sets the options given by flags on o; the others keep their values.
func (r *routeFlags) apply(f *pflag.FlagSet, o *tollgatev1.RouteOptions) {
	if f.Changed("strategy") {
		o.Strategy = strings.TrimSpace(r.strategy)
	}
	if f.Changed("fallback") || r.noFallbacks {
		o.Fallbacks = cleanList(r.fallbacks)
	}
	if f.Changed("context-fallback") || r.noContextFallbacks {
		o.ContextFallbacks = cleanList(r.contextFallbacks)
	}
	if f.Changed("alias") || r.noAliases {
		o.Aliases = cleanList(r.aliases)
	}
	if f.Changed("max-attempts") {
		o.MaxAttempts = r.maxAttempts
	}
}

func (a *app) modelTestCommand() *cobra.Command {
	var (
		prompt string
		stream bool
	)
	cmd := &cobra.Command{
		Use:   "test NAME [--prompt TEXT] [--stream]",
		Short: "Send a test request through a model route",
		Long: `Send a small chat request for the model NAME through the gateway, as a
client would, and show the HTTP status the client would have seen, the
route and deployment that answered (the last one tried on failure), the
latency, the attempts it took, the token counts and the reply. The request
is made by the node that serves this call, without a virtual key, so no
key's budget or rate limits are involved.

The route is named when it is not NAME: an alias or a wildcard route may
serve NAME, and a fallback model may answer when NAME's deployments fail.

--stream asks for a streamed answer, which also exercises the deployments'
first-token timeouts. The test waits for the upstream; raise --timeout for
slow models.

The exit code is 0 for a 2xx status and 1 otherwise; the details are printed
either way (the reply is then the error message). With -o json, print the
API's answer as one object.`,
		Example: `  tollctl model test gpt-4o
  tollctl model test claude-sonnet-4 --prompt "Reply with one word: ready?" --stream
  tollctl --timeout 1m model test llama -o json | jq .latency_ms`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.models.TestModel(ctx, &tollgatev1.TestModelRequest{Model: name, Prompt: prompt, Stream: stream})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if err := a.printProto(resp); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(a.stdout, fmtTestResult(name, resp))
				if reply := strings.TrimSpace(resp.GetReply()); reply != "" {
					fmt.Fprintln(a.stdout, reply)
				}
			}
			if st := resp.GetStatus(); st < 200 || st > 299 {
				return fmt.Errorf("test of model %s failed with status %d", name, st)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&prompt, "prompt", "", `the user message to send (default: the server's, "Say hello.")`)
	cmd.Flags().BoolVar(&stream, "stream", false, "ask for a streamed answer")
	return cmd
}

// fmtTestResult renders the first line of model test: status, who answered,
// latency, attempts and tokens.
func fmtTestResult(name string, r *tollgatev1.TestModelResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model %s: %d", name, r.GetStatus())
	if d := r.GetDeployment(); d != "" {
		fmt.Fprintf(&b, " from deployment %s", d)
		if p := r.GetProvider(); p != "" {
			fmt.Fprintf(&b, " (%s)", p)
		}
	}
	if rt := r.GetRoute(); rt != "" && rt != name {
		fmt.Fprintf(&b, " of model %s", rt)
	}
	fmt.Fprintf(&b, " in %d ms after %d attempt(s)", r.GetLatencyMs(), r.GetAttempts())
	ok := r.GetStatus() >= 200 && r.GetStatus() <= 299
	if ok || r.GetPromptTokens() != 0 || r.GetCompletionTokens() != 0 {
		fmt.Fprintf(&b, "; %d prompt + %d completion tokens", r.GetPromptTokens(), r.GetCompletionTokens())
	}
	return b.String()
}
