package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func (a *app) keyCommand() *cobra.Command {
	cmd := groupCommand("key",
		"Manage virtual API keys",
		`Virtual API keys are what clients send to the gateway instead of provider
keys. A key can be limited to some models, can expire, and carries free-form
labels. A key can belong to a team (see tollctl team) and can have a budget
and rate limits of its own; a request must fit both the key's and the team's
budget and limits. Its secret is shown only when the key is created or
rotated.`,
		`  tollctl key create --name ci --models gpt-4o,gpt-4o-mini --expires-in 30d
  tollctl key create --name notebook --team team_3f2a9c --budget 25 --period week
  tollctl key create --name batch --rpm 600 --tpm 100000 --max-parallel 8
  tollctl key list --all
  tollctl key import customers.jsonl --secrets-out new-secrets.jsonl`)
	cmd.AddCommand(a.keyCreateCommand(), a.keyListCommand(), a.keyGetCommand(),
		a.keyUpdateCommand(), a.keyRevokeCommand(), a.keyRotateCommand(), a.keyImportCommand())
	return cmd
}

func (a *app) keyCreateCommand() *cobra.Command {
	var (
		name      string
		models    []string
		expiresIn string
		meta      []string
		team      string
		b         = budgetFlags{what: "key"}
		l         = limitFlags{what: "key"}
	)
	cmd := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create a key and print its secret once",
		Long: `Create a virtual API key. The secret is printed once and cannot be shown
again: only its hash is stored. With -o json the output is one flat object
holding the key's fields plus "secret".

--team puts the key in a team, whose budget then applies to it too. --budget
gives the key a budget of its own, in dollars per --period (day, week, month
or total); requests for models without a known price are refused by the
budget unless --allow-unpriced is given.

--rpm, --tpm and --max-parallel give the key rate limits of its own,
cluster-wide: requests per minute, tokens (prompt plus completion) per
minute, and requests in flight at once. 0 means unlimited; a team's limits
still apply.`,
		Example: `  tollctl key create --name ci --models gpt-4o --expires-in 30d --meta team=infra
  tollctl key create --name batch --rpm 600 --tpm 100000 --max-parallel 8
  tollctl key create --name notebook --team team_3f2a9c --budget 25 --period week
  SECRET=$(tollctl key create --name batch -o json | jq -r .secret)`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			req := &tollgatev1.CreateKeyRequest{Name: name, Models: cleanList(models), TeamId: team}
			var err error
			if req.Metadata, err = parseLabels(meta); err != nil {
				return err
			}
			if req.Budget, err = b.create(cmd.Flags()); err != nil {
				return err
			}
			if req.Limits, err = l.create(); err != nil {
				return err
			}
			if cmd.Flags().Changed("expires-in") {
				if req.ExpiresAt, err = a.expiry(expiresIn); err != nil {
					return err
				}
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.keys.CreateKey(ctx, req)
			if err != nil {
				return err
			}
			return a.printSecret("Created", resp.GetKey(), resp.GetSecret())
		}),
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "human name of the key, e.g. the service or person using it (required)")
	f.StringSliceVar(&models, "models", nil, "comma-separated model allow-list; names or patterns with '*' (default: all models)")
	f.StringVar(&expiresIn, "expires-in", "", "lifetime such as 12h, 30d or 2w (default: never expires)")
	f.StringArrayVar(&meta, "meta", nil, "label as key=value; repeat for more")
	f.StringVar(&team, "team", "", "id of the team the key belongs to (default: none)")
	b.register(cmd, false)
	l.register(cmd, false)
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func (a *app) keyListCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List keys",
		Long: `List virtual API keys. Revoked keys are hidden unless --all is given.
STATUS is active, expired or revoked. TEAM is the id of the key's team, "-"
for none. LIMITS are the key's own rate limits, e.g. "600rpm 100000tpm 8par"
(requests and tokens per minute, requests in flight), "-" for none.`,
		Example: `  tollctl key list
  tollctl key list --all -o json | jq -r '.[] | select(.revoked_at == null) | .id'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			keys, err := listEveryKey(ctx, api.keys, all)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				raw, err := protoJSONList(keys)
				if err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			if len(keys) == 0 {
				fmt.Fprintln(a.stdout, "No keys.")
				return nil
			}
			tw := newTable(a.stdout)
			row(tw, "ID", "NAME", "TEAM", "PREFIX", "MODELS", "EXPIRES", "STATUS", "CREATED", "LIMITS")
			for _, k := range keys {
				row(tw, k.GetId(), orDash(k.GetName()), orDash(k.GetTeamId()), orDash(k.GetSecretPrefix()), fmtModels(k.GetModels()),
					fmtExpiry(k.GetExpiresAt()), a.keyStatus(k), fmtTime(k.GetCreatedAt()), fmtLimits(k.GetLimits()))
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "include revoked keys")
	return cmd
}

func (a *app) keyGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show one key and its budget status",
		Long: `Show a key's details: name, secret prefix, team, models, expiry, status,
budget, rate limits and labels, and the state of the key's own budget and of its team's
budget in the current period, cluster-wide: spent (settled by the nodes),
leased (granted to nodes and not settled yet), remaining (limit minus spent)
and when the period resets.

With -o json the output is one flat object holding the key's fields plus
"budget_status" and "team_budget_status" (null without such a budget; money
in integer nano-dollars, times in Unix seconds).`,
		Example: `  tollctl key get key_3f2a9c
  tollctl key get key_3f2a9c -o json | jq .team_budget_status.remaining_nanos`,
		Args: exactArgs("id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.keys.GetKey(ctx, &tollgatev1.GetKeyRequest{Id: args[0]})
			if err != nil {
				return err
			}
			k := resp.GetKey()
			if a.jsonOutput() {
				raw, err := protoJSON(k)
				if err != nil {
					return err
				}
				for _, f := range []struct {
					name string
					st   *tollgatev1.BudgetStatus
				}{{"budget_status", resp.GetBudgetStatus()}, {"team_budget_status", resp.GetTeamBudgetStatus()}} {
					st, err := protoJSON(f.st)
					if err == nil {
						raw, err = withRawField(raw, f.name, st)
					}
					if err != nil {
						return err
					}
				}
				return writeJSON(a.stdout, raw)
			}
			tw := newTable(a.stdout)
			a.keyRows(tw, k, resp)
			return tw.Flush()
		}),
	}
}

// keyUpdateFlags are the flags of key update.
type keyUpdateFlags struct {
	name, expiresIn, team string
	models, meta          []string
	allModels, noExpiry   bool
	b                     budgetFlags
	l                     limitFlags
}

func (a *app) keyUpdateCommand() *cobra.Command {
	k := keyUpdateFlags{b: budgetFlags{what: "key"}, l: limitFlags{what: "key"}}
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change a key's name, models, expiry, team, budget, rate limits or labels",
		Long: `Change a key. Only the flags you give are sent; everything else stays as
it is. --models replaces the allow-list, --all-models clears it. --meta merges
labels into the existing ones; an empty value (--meta team=) deletes a label.
--team moves the key to another team; --team "" takes it out of its team.

A budget is replaced as a whole, so budget settings you leave out are taken
from the key's current budget: --budget alone changes the limit and keeps the
period, --period alone changes the period, --allow-unpriced=true or =false
alone changes only that. A key without a budget needs both --budget and
--period. --no-budget removes the key's own budget (a team budget still
applies).

Rate limits are replaced as a whole too: --rpm, --tpm and --max-parallel
you leave out keep their current values, so --rpm 600 alone changes only the
requests per minute; 0 removes that one limit. --no-limits removes all of
the key's own limits (a team's limits still apply).`,
		Example: `  tollctl key update key_3f2a9c --models gpt-4o,claude-*
  tollctl key update key_3f2a9c --expires-in 90d --meta owner=alice
  tollctl key update key_3f2a9c --all-models --no-expiry
  tollctl key update key_3f2a9c --team team_3f2a9c --budget 50 --period month
  tollctl key update key_3f2a9c --team "" --no-budget
  tollctl key update key_3f2a9c --rpm 600 --max-parallel 0
  tollctl key update key_3f2a9c --no-limits`,
		Args: exactArgs("id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			req, err := k.request(a, f, args[0])
			if err != nil {
				return err
			}
			return a.keyCall(cmd, "Updated", func(api *clients, ctx context.Context) (*tollgatev1.Key, error) {
				var err error
				req.Budget, req.Limits, err = mergeSettings(f, req.Id, &k.b, &k.l, func() (*tollgatev1.Budget, *tollgatev1.RateLimits, error) {
					resp, err := api.keys.GetKey(ctx, &tollgatev1.GetKeyRequest{Id: req.Id})
					return resp.GetKey().GetBudget(), resp.GetKey().GetLimits(), err
				})
				if err != nil {
					return nil, err
				}
				resp, err := api.keys.UpdateKey(ctx, req)
				return resp.GetKey(), err
			})
		}),
	}
	k.register(cmd)
	return cmd
}

func (k *keyUpdateFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&k.name, "name", "", "new name")
	f.StringSliceVar(&k.models, "models", nil, "new comma-separated model allow-list (replaces the old one)")
	f.BoolVar(&k.allModels, "all-models", false, "allow every model (clears the allow-list)")
	f.StringVar(&k.expiresIn, "expires-in", "", "new lifetime from now, such as 12h, 30d or 2w")
	f.BoolVar(&k.noExpiry, "no-expiry", false, "remove the expiry")
	f.StringArrayVar(&k.meta, "meta", nil, "set label key=value, or delete it with key=; repeat for more")
	f.StringVar(&k.team, "team", "", `move the key to this team; "" takes it out of its team`)
	k.b.register(cmd, true)
	k.l.register(cmd, true)
	cmd.MarkFlagsMutuallyExclusive("models", "all-models")
	cmd.MarkFlagsMutuallyExclusive("expires-in", "no-expiry")
}

// request checks the flags and builds the update from those given; the budget and the
// limits are merged with the key's current ones later, once the API is at hand.
func (k *keyUpdateFlags) request(a *app, f *pflag.FlagSet, id string) (*tollgatev1.UpdateKeyRequest, error) {
	req := &tollgatev1.UpdateKeyRequest{Id: id, ClearExpiresAt: k.noExpiry}
	if f.Changed("name") {
		req.Name = &k.name
	}
	if f.Changed("models") {
		req.Models = &tollgatev1.StringList{Values: cleanList(k.models)}
	}
	if k.allModels {
		req.Models = &tollgatev1.StringList{}
	}
	var err error
	if f.Changed("expires-in") {
		if req.ExpiresAt, err = a.expiry(k.expiresIn); err != nil {
			return nil, err
		}
	}
	if req.Metadata, err = parseLabels(k.meta); err != nil {
		return nil, err
	}
	if f.Changed("team") {
		req.TeamId = &k.team
	}
	req.ClearBudget = k.b.none
	if err := k.b.check(f); err != nil {
		return nil, err
	}
	if err := k.l.check(); err != nil {
		return nil, err
	}
	if req.Name == nil && req.Models == nil && req.ExpiresAt == nil && !req.ClearExpiresAt && req.Metadata == nil &&
		req.TeamId == nil && !req.ClearBudget && !k.b.changed(f) && !k.l.none && !k.l.changed(f) {
		return nil, usageErrorf("nothing to update: give at least one of --name, --models, --all-models, --expires-in, --no-expiry, --team, --budget, --period, --allow-unpriced, --no-budget, --rpm, --tpm, --max-parallel, --no-limits, --meta")
	}
	return req, nil
}

func (a *app) keyRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a key at once",
		Long: `Revoke a key: the gateway refuses it from now on. The key stays listed
(key list --all) with status revoked. This cannot be undone.`,
		Example: `  tollctl key revoke key_3f2a9c`,
		Args:    exactArgs("id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.keyCall(cmd, "Revoked", func(api *clients, ctx context.Context) (*tollgatev1.Key, error) {
				resp, err := api.keys.RevokeKey(ctx, &tollgatev1.RevokeKeyRequest{Id: args[0]})
				return resp.GetKey(), err
			})
		}),
	}
}

func (a *app) keyRotateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rotate ID",
		Short: "Replace a key's secret and print the new one once",
		Long: `Give a key a new secret. The old secret stops working at once. The new
secret is printed once; with -o json the output is one flat object holding
the key's fields plus "secret", as for key create.`,
		Example: `  tollctl key rotate key_3f2a9c
  tollctl key rotate key_3f2a9c -o json | jq -r .secret`,
		Args: exactArgs("id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.keys.RotateKey(ctx, &tollgatev1.RotateKeyRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return a.printSecret("Rotated", resp.GetKey(), resp.GetSecret())
		}),
	}
}

// keyCall runs one key RPC and prints the resulting key.
func (a *app) keyCall(cmd *cobra.Command, verb string, call func(*clients, context.Context) (*tollgatev1.Key, error)) error {
	api, err := a.api()
	if err != nil {
		return err
	}
	ctx, cancel := a.callContext(cmd)
	defer cancel()
	k, err := call(api, ctx)
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		return a.printProto(k)
	}
	if verb != "" {
		fmt.Fprintf(a.stdout, "%s key %s.\n\n", verb, k.GetId())
	}
	return a.printKey(k)
}

const secretWarning = "This secret is shown only once and cannot be retrieved again. Store it now."

// printSecret prints a key together with its new secret.
func (a *app) printSecret(verb string, k *tollgatev1.Key, secret string) error {
	if a.jsonOutput() {
		raw, err := protoJSON(k)
		if err == nil {
			raw, err = withField(raw, "secret", secret)
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stderr, "warning: the secret is shown only once and cannot be retrieved again; store it now")
		return writeJSON(a.stdout, raw)
	}
	fmt.Fprintf(a.stdout, "%s key %s.\n\n", verb, k.GetId())
	if err := a.printKey(k); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nSecret: %s\n\n%s\n", secret, secretWarning)
	return nil
}

// printKey shows one key as aligned "Field: value" lines.
func (a *app) printKey(k *tollgatev1.Key) error {
	tw := newTable(a.stdout)
	a.keyRows(tw, k, nil)
	return tw.Flush()
}

// keyRows writes a key's fields as "Field: value" rows, with the budget
// status lines of get when it is not nil.
func (a *app) keyRows(tw io.Writer, k *tollgatev1.Key, get *tollgatev1.GetKeyResponse) {
	row(tw, "ID:", k.GetId())
	row(tw, "Name:", orDash(k.GetName()))
	row(tw, "Prefix:", orDash(k.GetSecretPrefix()))
	row(tw, "Team:", orDash(k.GetTeamId()))
	row(tw, "Budget:", fmtBudget(k.GetBudget()))
	if get != nil {
		if st := get.GetBudgetStatus(); st != nil {
			row(tw, "Budget status:", fmtBudgetStatus(st))
		}
		if k.GetTeamId() != "" {
			team := "none"
			if st := get.GetTeamBudgetStatus(); st != nil {
				team = fmtBudgetStatus(st)
			}
			row(tw, "Team budget:", team)
		}
	}
	row(tw, "Limits:", fmtLimits(k.GetLimits()))
	row(tw, "Models:", fmtModels(k.GetModels()))
	row(tw, "Status:", a.keyStatus(k))
	row(tw, "Expires:", fmtExpiry(k.GetExpiresAt()))
	if k.GetRevokedAt() != nil {
		row(tw, "Revoked:", fmtTime(k.GetRevokedAt()))
	}
	row(tw, "Created:", fmtTime(k.GetCreatedAt()))
	row(tw, "Updated:", fmtTime(k.GetUpdatedAt()))
	row(tw, "Labels:", fmtLabels(k.GetMetadata()))
}

// keyStatus is revoked, expired or active.
func (a *app) keyStatus(k *tollgatev1.Key) string {
	switch {
	case k.GetRevokedAt() != nil:
		return "revoked"
	case k.GetExpiresAt() != nil && !a.now().Before(k.GetExpiresAt().AsTime()):
		return "expired"
	}
	return "active"
}

// expiry turns an --expires-in value into an absolute time.
func (a *app) expiry(s string) (*timestamppb.Timestamp, error) {
	d, err := parseDuration(s)
	if err != nil {
		return nil, &usageError{msg: "--expires-in: " + err.Error()}
	}
	if d <= 0 {
		return nil, usageErrorf("--expires-in must be positive")
	}
	return timestamppb.New(a.now().Add(d).Truncate(time.Second)), nil
}

func fmtModels(models []string) string {
	if len(models) == 0 {
		return "(all)"
	}
	return strings.Join(models, ",")
}

func fmtExpiry(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "never"
	}
	return fmtTime(ts)
}
