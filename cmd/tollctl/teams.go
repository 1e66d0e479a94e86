package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func (a *app) teamCommand() *cobra.Command {
	cmd := groupCommand("team",
		"Manage teams and their shared budgets",
		`A team groups keys (key create --team, key update --team). A team budget is
shared by all the team's keys: once the team has spent its limit in the
current period, every key of the team is refused until the period resets,
whatever the keys' own budgets say. Amounts are in dollars. Team rate limits
(requests and tokens per minute, requests in flight) are shared the same way.`,
		`  tollctl team create --name research --budget 500 --period month
  tollctl team create --name batch --rpm 1200 --tpm 500000
  tollctl key create --name notebook --team team_3f2a9c
  tollctl team get team_3f2a9c`)
	cmd.AddCommand(a.teamCreateCommand(), a.teamListCommand(), a.teamGetCommand(),
		a.teamUpdateCommand(), a.teamDeleteCommand())
	return cmd
}

func (a *app) teamCreateCommand() *cobra.Command {
	var (
		name string
		meta []string
		b    = budgetFlags{what: "team"}
		l    = limitFlags{what: "team"}
	)
	cmd := &cobra.Command{
		Use:   "create --name NAME [--budget AMOUNT --period PERIOD]",
		Short: "Create a team",
		Long: `Create a team, optionally with a budget shared by all its keys. --budget is
in dollars (up to 9 decimals) and needs --period: day, week (from Monday
00:00 UTC), month (UTC calendar month) or total (never resets). Requests for
models without a known price are refused by a budget unless --allow-unpriced
is given. --rpm, --tpm and --max-parallel set rate limits shared by all the
team's keys, cluster-wide: requests per minute, tokens (prompt plus
completion) per minute and requests in flight at once; 0 means unlimited.
With -o json the team object is printed.`,
		Example: `  tollctl team create --name research
  tollctl team create --name research --budget 500 --period month --meta owner=alice
  tollctl team create --name batch --rpm 1200 --tpm 500000 --max-parallel 16
  tollctl team create --name batch --budget 12.50 --period day --allow-unpriced -o json | jq -r .id`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			req := &tollgatev1.CreateTeamRequest{Name: name}
			var err error
			if req.Budget, err = b.create(cmd.Flags()); err != nil {
				return err
			}
			if req.Limits, err = l.create(); err != nil {
				return err
			}
			if req.Metadata, err = parseLabels(meta); err != nil {
				return err
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.teams.CreateTeam(ctx, req)
			if err != nil {
				return err
			}
			return a.printTeamResult("Created", resp.GetTeam())
		}),
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "name of the team (required)")
	b.register(cmd, false)
	l.register(cmd, false)
	f.StringArrayVar(&meta, "meta", nil, "label as key=value; repeat for more")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func (a *app) teamListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List teams",
		Long: `List teams with their budgets and rate limits. BUDGET is the spend limit
per PERIOD, "-" for a team without a budget. LIMITS are the rate limits,
e.g. "600rpm 100000tpm 8par" (requests and tokens per minute, requests in
flight), "-" for none. With -o json, print an array of teams (budget limits
in integer nano-dollars, limit_nanos).`,
		Example: `  tollctl team list
  tollctl team list -o json | jq -r '.[] | select(.budget == null) | .name'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.teams.ListTeams(ctx, &tollgatev1.ListTeamsRequest{})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				raw, err := protoJSONList(resp.GetTeams())
				if err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			if len(resp.GetTeams()) == 0 {
				fmt.Fprintln(a.stdout, "No teams.")
				return nil
			}
			tw := newTable(a.stdout)
			row(tw, "ID", "NAME", "BUDGET", "PERIOD", "LIMITS")
			for _, t := range resp.GetTeams() {
				limit, period := "-", "-"
				if b := t.GetBudget(); b != nil {
					limit, period = fmtNanos(b.GetLimitNanos()), b.GetPeriod()
				}
				row(tw, t.GetId(), orDash(t.GetName()), limit, period, fmtLimits(t.GetLimits()))
			}
			return tw.Flush()
		}),
	}
}

func (a *app) teamGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a team, its budget status and its keys",
		Long: `Show a team: its name, budget, rate limits and labels, the state of its budget in the
current period cluster-wide, and the ids of its keys. Spent is what the
nodes have settled; leased is granted to nodes for requests in flight and
not settled yet; remaining is the limit minus spent.

With -o json the output is one flat object holding the team's fields plus
"budget_status" (null without a budget; money in integer nano-dollars,
times in Unix seconds) and "key_ids".`,
		Example: `  tollctl team get team_3f2a9c
  tollctl team get team_3f2a9c -o json | jq .budget_status.remaining_nanos`,
		Args: exactArgs("id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.teams.GetTeam(ctx, &tollgatev1.GetTeamRequest{Id: args[0]})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				raw, err := protoJSON(resp.GetTeam())
				if err != nil {
					return err
				}
				st, err := protoJSON(resp.GetBudgetStatus())
				if err != nil {
					return err
				}
				ids, err := json.Marshal(append([]string{}, resp.GetKeyIds()...))
				if err != nil {
					return err
				}
				if raw, err = withRawField(raw, "budget_status", st); err != nil {
					return err
				}
				if raw, err = withRawField(raw, "key_ids", ids); err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			t := resp.GetTeam()
			tw := newTable(a.stdout)
			teamRows(tw, t)
			if st := resp.GetBudgetStatus(); st != nil {
				statusRows(tw, st)
			}
			row(tw, "Limits:", fmtLimits(t.GetLimits()))
			keys := "-"
			if ids := resp.GetKeyIds(); len(ids) > 0 {
				keys = fmt.Sprintf("%s (%d)", strings.Join(ids, ", "), len(ids))
			}
			row(tw, "Keys:", keys)
			row(tw, "Created:", fmtTime(t.GetCreatedAt()))
			row(tw, "Updated:", fmtTime(t.GetUpdatedAt()))
			row(tw, "Labels:", fmtLabels(t.GetMetadata()))
			return tw.Flush()
		}),
	}
}

func (a *app) teamUpdateCommand() *cobra.Command {
	var (
		name string
		meta []string
		b    = budgetFlags{what: "team"}
		l    = limitFlags{what: "team"}
	)
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change a team's name, budget, rate limits or labels",
		Long: `Change a team. Only the flags you give are sent; everything else stays as
it is. A budget is replaced as a whole, so settings you leave out are taken
from the team's current budget: --budget alone changes the limit and keeps
the period, --period alone changes the period, and --allow-unpriced=true or
=false alone changes only that. A team without a budget needs both --budget
and --period. --no-budget removes the budget. --meta merges labels into the
existing ones; an empty value (--meta owner=) deletes a label.

Rate limits are replaced as a whole too: --rpm, --tpm and --max-parallel
you leave out keep their current values, so --rpm 600 alone changes only the
requests per minute; 0 removes that one limit. --no-limits removes them all.`,
		Example: `  tollctl team update team_3f2a9c --budget 750
  tollctl team update team_3f2a9c --budget 20 --period day --allow-unpriced
  tollctl team update team_3f2a9c --allow-unpriced=false
  tollctl team update team_3f2a9c --no-budget --name research-old
  tollctl team update team_3f2a9c --tpm 200000
  tollctl team update team_3f2a9c --no-limits`,
		Args: exactArgs("id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			id := args[0]
			req := &tollgatev1.UpdateTeamRequest{Id: id, ClearBudget: b.none}
			if f.Changed("name") {
				req.Name = &name
			}
			var err error
			if req.Metadata, err = parseLabels(meta); err != nil {
				return err
			}
			if err := b.check(f); err != nil {
				return err
			}
			if err := l.check(); err != nil {
				return err
			}
			if req.Name == nil && req.Metadata == nil && !req.ClearBudget && !b.changed(f) && !l.none && !l.changed(f) {
				return usageErrorf("nothing to update: give at least one of --name, --budget, --period, --allow-unpriced, --no-budget, --rpm, --tpm, --max-parallel, --no-limits, --meta")
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			req.Budget, req.Limits, err = mergeSettings(f, id, &b, &l, func() (*tollgatev1.Budget, *tollgatev1.RateLimits, error) {
				resp, err := api.teams.GetTeam(ctx, &tollgatev1.GetTeamRequest{Id: id})
				return resp.GetTeam().GetBudget(), resp.GetTeam().GetLimits(), err
			})
			if err != nil {
				return err
			}
			resp, err := api.teams.UpdateTeam(ctx, req)
			if err != nil {
				return err
			}
			return a.printTeamResult("Updated", resp.GetTeam())
		}),
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "new name")
	b.register(cmd, true)
	l.register(cmd, true)
	f.StringArrayVar(&meta, "meta", nil, "set label key=value, or delete it with key=; repeat for more")
	return cmd
}

func (a *app) teamDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a team that has no keys",
		Long: `Delete a team. This fails while keys belong to the team: move them to
another team or out of it first (key update ID --team ...), or revoke them.
With -o json an empty object is printed.`,
		Example: `  tollctl team delete team_3f2a9c`,
		Args:    exactArgs("id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.teams.DeleteTeam(ctx, &tollgatev1.DeleteTeamRequest{Id: args[0]})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp)
			}
			fmt.Fprintf(a.stdout, "Deleted team %s.\n", args[0])
			return nil
		}),
	}
}

// printTeamResult prints a created or updated team.
func (a *app) printTeamResult(verb string, t *tollgatev1.Team) error {
	if a.jsonOutput() {
		return a.printProto(t)
	}
	fmt.Fprintf(a.stdout, "%s team %s.\n\n", verb, t.GetId())
	tw := newTable(a.stdout)
	teamRows(tw, t)
	row(tw, "Limits:", fmtLimits(t.GetLimits()))
	row(tw, "Created:", fmtTime(t.GetCreatedAt()))
	row(tw, "Updated:", fmtTime(t.GetUpdatedAt()))
	row(tw, "Labels:", fmtLabels(t.GetMetadata()))
	return tw.Flush()
}

// teamRows writes a team's id, name and budget.
func teamRows(tw io.Writer, t *tollgatev1.Team) {
	row(tw, "ID:", t.GetId())
	row(tw, "Name:", orDash(t.GetName()))
	row(tw, "Budget:", fmtBudget(t.GetBudget()))
}
