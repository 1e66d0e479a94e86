package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

const maxAuditLimit = 10000

func (a *app) auditCommand() *cobra.Command {
	var (
		user, since, until string
		limit              uint32
	)
	cmd := &cobra.Command{
		Use:   "audit [--user NAME] [--since WHEN] [--until WHEN] [--limit N]",
		Short: "Show who changed what: the audit log",
		Long: `Show the audit log, newest first: one record per admin write (keys, teams,
models, credentials, users, restores, node removals), with who made it (a
user, or "bootstrap" for the bootstrap admin token), when, from which address,
the RPC, a summary of what it changed, the Raft index, and the error if the
change was refused. Secrets, key secrets, credential values and tokens are
never recorded.

The log is part of the replicated state: every node holds it, it survives
restarts, snapshots and restores, and no API call edits or deletes a record.
Records expire after 90 days, and beyond the newest 50,000.

--user keeps one user's records; --since and --until take a time before now
(24h, 7d), a date (2026-11-01, UTC) or an RFC 3339 time. --limit caps the
records (default 100, at most ` + strconv.Itoa(maxAuditLimit) + `). With -o json an array of records
is printed (time in RFC 3339).`,
		Example: `  tollctl audit
  tollctl audit --user alice --since 7d
  tollctl audit --since 2026-11-01 -o json | jq -r '.[] | [.time, .user, .rpc] | @tsv'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			req := &tollgatev1.ListAuditRequest{User: user, Limit: limit}
			var err error
			if since != "" {
				if req.Since, err = a.parseWhen("since", since); err != nil {
					return err
				}
			}
			if until != "" {
				if req.Until, err = a.parseWhen("until", until); err != nil {
					return err
				}
			}
			if limit > maxAuditLimit {
				return usageErrorf("--limit %d: at most %d", limit, maxAuditLimit)
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.audit.ListAudit(ctx, req)
			if err != nil {
				return err
			}
			return a.printAudit(resp.GetRecords())
		}),
	}
	f := cmd.Flags()
	f.StringVar(&user, "user", "", `only this user's records ("bootstrap" for the bootstrap admin token)`)
	f.StringVar(&since, "since", "", "only records from this time on (default: the oldest kept)")
	f.StringVar(&until, "until", "", "only records up to this time (default: now)")
	f.Uint32Var(&limit, "limit", 100, "at most this many records, newest first")
	return cmd
}

func (a *app) printAudit(recs []*tollgatev1.AuditRecord) error {
	if a.jsonOutput() {
		raw, err := protoJSONList(recs)
		if err != nil {
			return err
		}
		return writeJSON(a.stdout, raw)
	}
	if len(recs) == 0 {
		fmt.Fprintln(a.stdout, "No audit records.")
		return nil
	}
	tw := newTable(a.stdout)
	row(tw, "TIME", "USER", "ROLE", "ADDRESS", "RPC", "INDEX", "RESULT", "CHANGE")
	for _, r := range recs {
		result := "ok"
		if r.GetError() != "" {
			result = "failed: " + r.GetError()
		}
		row(tw, fmtTime(r.GetTime()), r.GetUser(), orDash(r.GetRole()), orDash(r.GetAddress()), orDash(r.GetRpc()),
			strconv.FormatUint(r.GetIndex(), 10), result, r.GetSummary())
	}
	return tw.Flush()
}
