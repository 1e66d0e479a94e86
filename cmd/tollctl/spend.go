package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// reportGroups are the groupings spend report accepts.
var reportGroups = []string{"key", "team", "model", "day", "hour"}

// maxLogsLimit is the most records spend logs returns.
const maxLogsLimit = 10000

func (a *app) spendCommand() *cobra.Command {
	cmd := groupCommand("spend",
		"Report spend and show request logs",
		`Every request through the gateway is recorded with its tokens and cost.
spend report sums the cluster-wide hourly totals, grouped by key, team,
model, day or hour; spend logs shows the newest raw records from every node.
Costs are in dollars; requests to models without a known price are counted
as unpriced (see tollctl model prices).`,
		`  tollctl spend report --since 7d
  tollctl spend report --team team_3f2a9c --by key --since 2026-11-01
  tollctl spend logs --key key_3f2a9c --limit 20`)
	cmd.AddCommand(a.spendReportCommand(), a.spendLogsCommand())
	return cmd
}

func (a *app) spendReportCommand() *cobra.Command {
	var (
		keyID, teamID, by, since, until string
	)
	cmd := &cobra.Command{
		Use:   "report [--key ID | --team ID] [--by GROUP] [--since WHEN] [--until WHEN]",
		Short: "Sum requests, tokens and cost, grouped",
		Long: `Sum requests, tokens and cost over a time window, cluster-wide, grouped by
key, team, model (the default), day or hour (UTC), with a TOTAL row. --key or
--team limits the report to one key or team.

--since (default 30d) and --until (default now) each take a time before now
such as 24h, 7d or 2w, a date such as 2026-11-01 (midnight UTC), or an RFC
3339 time such as 2026-11-01T09:00:00Z. Totals are kept per hour, so the
window starts at the beginning of the hour that contains --since.

PROMPT counts every prompt token; CACHED those of them read from the
provider's prompt cache and CACHE-WRITE those written to it (Anthropic,
Bedrock), each charged at its own rate. COST is in dollars; UNPRICED counts
requests to models without a known price, whose cost is not included. Rows
are sorted by cost, or by time for day and hour. With -o json the response is printed: "rows" and "total", with
cost_nanos in integer nano-dollars.`,
		Example: `  tollctl spend report
  tollctl spend report --by day --since 7d
  tollctl spend report --team team_3f2a9c --by key --since 2026-11-01 --until 2026-12-01
  tollctl spend report --by team -o json | jq -r '.rows[] | "\(.group) \(.cost_nanos)"'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(reportGroups, by) {
				return usageErrorf("invalid --by %q: use %s", by, strings.Join(reportGroups, ", "))
			}
			req := &tollgatev1.SpendReportRequest{KeyId: keyID, TeamId: teamID, By: by}
			var err error
			if req.Since, err = a.parseWhen("since", since); err != nil {
				return err
			}
			if cmd.Flags().Changed("until") {
				if req.Until, err = a.parseWhen("until", until); err != nil {
					return err
				}
				if req.Until <= req.Since {
					return usageErrorf("--until %s is not after --since %s", fmtUnix(req.Until, "0"), fmtUnix(req.Since, "0"))
				}
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.spend.SpendReport(ctx, req)
			if err != nil {
				return err
			}
			return a.printSpendReport(resp)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&keyID, "key", "", "only this key's spend")
	f.StringVar(&teamID, "team", "", "only this team's spend")
	f.StringVar(&by, "by", "model", "grouping: "+strings.Join(reportGroups, ", "))
	f.StringVar(&since, "since", "30d", "start of the window: a duration before now (24h, 7d), a date (2026-11-01, UTC) or an RFC 3339 time")
	f.StringVar(&until, "until", "", "end of the window, in the same forms as --since (default: now)")
	cmd.MarkFlagsMutuallyExclusive("key", "team")
	return cmd
}

// printSpendReport prints a report as JSON or as a table with a TOTAL row.
func (a *app) printSpendReport(resp *tollgatev1.SpendReportResponse) error {
	if a.jsonOutput() {
		return a.printProto(resp)
	}
	total := resp.GetTotal()
	if total == nil {
		total = sumRows(resp.GetRows())
	}
	tw := newTable(a.stdout)
	row(tw, "GROUP", "REQUESTS", "PROMPT", "COMPLETION", "CACHED", "CACHE-WRITE", "COST", "UNPRICED")
	for _, r := range resp.GetRows() {
		reportRow(tw, orDash(r.GetGroup()), r)
	}
	reportRow(tw, "TOTAL", total)
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := total.GetUnpricedRequests(); n > 0 {
		fmt.Fprintf(a.stderr, "note: %d request(s) to models without a known price are not in COST\n", n)
	}
	return nil
}

func reportRow(tw io.Writer, group string, r *tollgatev1.SpendReportRow) {
	row(tw, group, fmtCount(r.GetRequests()), fmtCount(r.GetPromptTokens()), fmtCount(r.GetCompletionTokens()),
		fmtCount(r.GetCachedTokens()), fmtCount(r.GetCacheWriteTokens()), fmtNanos(r.GetCostNanos()), fmtCount(r.GetUnpricedRequests()))
}

// sumRows totals report rows, for a server that sent no total.
func sumRows(rows []*tollgatev1.SpendReportRow) *tollgatev1.SpendReportRow {
	t := &tollgatev1.SpendReportRow{Group: "total"}
	for _, r := range rows {
		t.Requests += r.GetRequests()
		t.PromptTokens += r.GetPromptTokens()
		t.CompletionTokens += r.GetCompletionTokens()
		t.CachedTokens += r.GetCachedTokens()
		t.CacheWriteTokens += r.GetCacheWriteTokens()
		t.CostNanos += r.GetCostNanos()
		t.UnpricedRequests += r.GetUnpricedRequests()
	}
	return t
}

func (a *app) spendLogsCommand() *cobra.Command {
	var (
		keyID, teamID, since string
		limit                uint32
	)
	cmd := &cobra.Command{
		Use:   "logs [--key ID] [--team ID] [--limit N] [--since WHEN]",
		Short: "Show the newest request records of every node",
		Long: `Show the newest raw request records, newest first, gathered from every
live node of the cluster. --key and --team filter them; --limit caps how
many (default 50, at most ` + strconv.Itoa(maxLogsLimit) + `). --since keeps only later requests; it
takes a time before now such as 1h or 7d, a date such as 2026-11-01 (midnight
UTC), or an RFC 3339 time such as 2026-11-01T09:00:00Z.

TIME is when the request was recorded (UTC), NODE the node that served it,
STATUS its HTTP status (499: the client went away), PROMPT and COMPLETION
its tokens, COST its cost in dollars ("unpriced" when the model has no known
price), LATENCY the whole request and TTFT the time to the first byte. Nodes
that could not be asked are named in a warning on stderr, as their records
are missing.

With -o json the response is printed: "records" (cost_nanos in integer
nano-dollars, unix_nanos, latency_micros and ttft_micros) and
"unreachable_nodes".`,
		Example: `  tollctl spend logs
  tollctl spend logs --key key_3f2a9c --since 1h
  tollctl spend logs --team team_3f2a9c --limit 500 -o json | jq '.records[] | select(.status >= 500)'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			if limit > maxLogsLimit {
				return usageErrorf("--limit %d is more than %d", limit, maxLogsLimit)
			}
			req := &tollgatev1.SpendLogsRequest{KeyId: keyID, TeamId: teamID, Limit: limit}
			if cmd.Flags().Changed("since") {
				var err error
				if req.Since, err = a.parseWhen("since", since); err != nil {
					return err
				}
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.spend.SpendLogs(ctx, req)
			if err != nil {
				return err
			}
			return a.printSpendLogs(resp)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&keyID, "key", "", "only this key's requests")
	f.StringVar(&teamID, "team", "", "only this team's requests")
	f.Uint32Var(&limit, "limit", 0, "most records to show (default 50, at most "+strconv.Itoa(maxLogsLimit)+")")
	f.StringVar(&since, "since", "", "only requests after this: a duration before now (1h, 7d), a date (2026-11-01, UTC) or an RFC 3339 time (default: any time)")
	return cmd
}

// printSpendLogs warns about nodes that could not be asked, then prints the records as
// JSON or as a table.
func (a *app) printSpendLogs(resp *tollgatev1.SpendLogsResponse) error {
	if nodes := resp.GetUnreachableNodes(); len(nodes) > 0 {
		fmt.Fprintf(a.stderr, "warning: could not ask node(s) %s; their records are missing\n", strings.Join(nodes, ", "))
	}
	if a.jsonOutput() {
		return a.printProto(resp)
	}
	if len(resp.GetRecords()) == 0 {
		fmt.Fprintln(a.stdout, "No records.")
		return nil
	}
	tw := newTable(a.stdout)
	row(tw, "TIME", "NODE", "KEY", "MODEL", "DEPLOYMENT", "STATUS", "PROMPT", "COMPLETION", "COST", "LATENCY", "TTFT")
	for _, r := range resp.GetRecords() {
		cost := fmtNanos(r.GetCostNanos())
		if r.GetUnpriced() {
			cost = "unpriced"
		}
		row(tw, time.Unix(0, r.GetUnixNanos()).UTC().Format(time.RFC3339), orDash(r.GetNode()), orDash(r.GetKeyId()),
			orDash(r.GetModel()), orDash(r.GetDeployment()), strconv.Itoa(int(r.GetStatus())),
			fmtCount(r.GetPromptTokens()), fmtCount(r.GetCompletionTokens()), cost,
			fmtLatency(r.GetLatencyMicros()), fmtLatency(r.GetTtftMicros()))
	}
	return tw.Flush()
}

// fmtLatency renders microseconds readably: 850µs, 12ms, 1.234s; "-" for 0.
func fmtLatency(us int64) string {
	if us <= 0 {
		return "-"
	}
	d := time.Duration(us) * time.Microsecond
	if d >= time.Millisecond {
		d = d.Round(time.Millisecond)
	}
	return d.String()
}
