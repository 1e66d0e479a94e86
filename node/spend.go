package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/ledger"
	"github.com/tollgate/tollgate/node/admin"
	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/prices"
)

// maxOverrideTiers is the most long-context tiers a price override has
// (the admin API refuses more).
const maxOverrideTiers = admin.MaxPriceTiers

// pricing prices deployments: a deployment's own price overrides the
// table.
type pricing struct{ table func() *prices.Table }

// priceOf returns d's price and where it comes from.
func (p pricing) priceOf(kind, baseURL, model string, override *pb.Price) (prices.Price, string, bool) {
	if override != nil {
		return overridePrice(override, new([maxOverrideTiers]prices.Tier)), "override", true
	}
	m, ok := p.table().Lookup(kind, baseURL, model)
	if !ok {
		return prices.Price{}, "unknown", false
	}
	return m.Price, "built-in " + m.Provider + "/" + m.Model, true
}

// overridePrice converts a deployment's own price. Its tiers go into buf
// while they fit (the admin API allows no more), so that pricing a request
// at an override allocates nothing.
func overridePrice(o *pb.Price, buf *[maxOverrideTiers]prices.Tier) prices.Price {
	p := prices.Price{InputMicros: o.GetInputMicrosPerMtok(), OutputMicros: o.GetOutputMicrosPerMtok(),
		CachedInputMicros: o.GetCachedInputMicrosPerMtok(), CacheWriteMicros: o.GetCacheWriteMicrosPerMtok(), Tiers: buf[:0]}
	for _, t := range o.GetTiers() {
		p.Tiers = append(p.Tiers, prices.Tier{Above: t.GetAbovePromptTokens(), InputMicros: t.GetInputMicrosPerMtok(),
			OutputMicros: t.GetOutputMicrosPerMtok(), CachedInputMicros: t.GetCachedInputMicrosPerMtok(),
			CacheWriteMicros: t.GetCacheWriteMicrosPerMtok()})
	}
	return p
}

// Cost implements proxy.Pricing. Unlike priceOf it builds no description
// of the price's source: it runs for every request.
func (p pricing) Cost(d *raftstore.Deployment, u routing.Usage) (int64, bool) {
	t := prices.Tokens{Prompt: u.PromptTokens, Completion: u.CompletionTokens, Cached: u.CachedTokens, CacheWrite: u.CacheWriteTokens}
	if d.Price != nil {
		var buf [maxOverrideTiers]prices.Tier
		pr := overridePrice(d.Price, &buf)
		return pr.Cost(t), true
	}
	m, ok := p.table().Lookup(d.Provider, d.BaseURL, d.UpstreamModel)
	if !ok {
		return 0, false
	}
	return m.Price.Cost(t), true
}

// MaxCost implements proxy.Pricing: the most a call of d's with at most
// prompt and completion tokens can cost, at any of its model's time-of-day
// or dated prices, long-context tiers and cache rates.
func (p pricing) MaxCost(d *raftstore.Deployment, prompt, completion int64) (int64, bool) {
	if d.Price != nil {
		var buf [maxOverrideTiers]prices.Tier
		pr := overridePrice(d.Price, &buf)
		return pr.MaxCost(prompt, completion), true
	}
	return p.table().MaxCost(d.Provider, d.BaseURL, d.UpstreamModel, prompt, completion)
}

// ledgerRecorder writes every finished, authenticated request to the
// ledger (proxy.Recorder).
type ledgerRecorder struct {
	l    *ledger.Ledger
	node string
	log  interface {
		Error(msg string, args ...any)
	}
}

func (lr ledgerRecorder) Record(rec *proxy.Record) {
	if rec.KeyID == "" {
		return // unauthenticated: nothing to account for
	}
	r := spendRecords.Get().(*pb.SpendRecord)
	*r = pb.SpendRecord{
		UnixNanos: rec.Start.UnixNano(), RequestId: rec.RequestID, Node: lr.node, KeyId: rec.KeyID,
		TeamId: rec.TeamID, Model: rec.Model, Deployment: rec.Deployment, Provider: rec.Provider,
		Endpoint: rec.Endpoint.Name(), Stream: rec.Stream, PromptTokens: rec.Usage.PromptTokens,
		CompletionTokens: rec.Usage.CompletionTokens, CachedTokens: rec.Usage.CachedTokens, CacheWriteTokens: rec.Usage.CacheWriteTokens,
		CostNanos: rec.CostNanos, Unpriced: rec.Unpriced, UsageRejected: rec.UsageRejected, Status: int32(rec.Status),
		LatencyMicros: rec.Latency.Microseconds(), TtftMicros: rec.FirstByte.Microseconds(), Attempts: int32(rec.Attempts),
	}
	if err := lr.l.Append(r, rec.Reservation.Uses(rec.BudgetNanos)); err != nil {
		lr.log.Error("ledger append failed", "request", rec.RequestID, "err", err)
	}
	spendRecords.Put(r) // Append keeps no reference to it
}

// spendRecords recycles the records handed to the ledger: one fewer
// allocation of about 380 bytes per request.
var spendRecords = sync.Pool{New: func() any { return new(pb.SpendRecord) }}

// incarnationFile holds, in the data dir, the Unix second at which the
// dir was first used by this release or a later one.
const incarnationFile = "incarnation"

// seedSpendSeq starts this data dir's spend-report seqs above those of
// every earlier incarnation of the node id: a seq is the incarnation's
// first second shifted left by 32 bits plus a count. The state machine
// remembers the highest seq applied per node id and drops lower ones as
// replays; without this, a node whose data dir was wiped (or a new machine
// given an old id) would start again from 1 and, once a snapshot that
// remembers the old seqs was restored, see every report dropped.
func (n *Node) seedSpendSeq() error {
	path := filepath.Join(n.cfg.DataDir, incarnationFile)
	var epoch int64
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if epoch, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil || epoch <= 0 || epoch >= 1<<31 {
			return fmt.Errorf("%s: not a Unix time: %q", path, strings.TrimSpace(string(b)))
		}
	case errors.Is(err, os.ErrNotExist):
		epoch = time.Now().Unix()
		if err := os.WriteFile(path, []byte(strconv.FormatInt(epoch, 10)+"\n"), 0o600); err != nil {
			return fmt.Errorf("save the data dir's incarnation: %w", err)
		}
	default:
		return fmt.Errorf("read the data dir's incarnation: %w", err)
	}
	n.ledger.SetMinSeq(uint64(epoch) << 32)
	return nil
}

// spendReportInterval is how often a node reports its spend into Raft.
const spendReportInterval = 2 * time.Second

// runSpendReports moves the ledger's spend deltas into Raft: every report
// carries the node's next seq, so a retried or replayed one is counted
// once. Acknowledged spend stops counting against this node's lease
// locally, since the state machine took it off the lease.
func (n *Node) runSpendReports(ctx context.Context) {
	t := time.NewTicker(spendReportInterval)
	defer t.Stop()
	seeded := false
	var notBefore time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !n.ready.Load() || time.Now().Before(notBefore) {
			continue
		}
		if !seeded {
			n.ledger.SetMinSeq(n.store.State().NodeSeq(n.cfg.NodeID))
			seeded = true
		}
		notBefore = time.Now().Add(reportPause(n.flushSpend(ctx)))
	}
}

// spendLogRate is how many bytes of spend reports a node writes into the
// Raft log per minute at most, on average: a node whose reports are large
// (many keys active since the last one) reports less often, down to once
// every maxReportPause. Budgets stay exact either way (spend not yet
// reported still counts against the node's lease); the replicated spend
// totals lag by up to the pause.
const spendLogRate = 768 << 10

// maxReportPause bounds the pause between two spend reports.
const maxReportPause = 2 * time.Minute

// reportPause is how long to wait after reports of size bytes before the
// next: what keeps the reports' share of the Raft log under spendLogRate.
func reportPause(bytes int) time.Duration {
	return min(time.Duration(bytes)*time.Minute/spendLogRate, maxReportPause)
}

// flushSpend sends the pending reports; it stops at the first failure
// (the next tick retries the same report). It returns the size of the
// spend report entries it proposed.
func (n *Node) flushSpend(ctx context.Context) int {
	return flushReports(ctx, reportSink{node: n.cfg.NodeID, ledger: n.ledger, state: n.store.State,
		propose: func(ctx context.Context, cmd *pb.Command) error {
			_, err := n.propose(ctx, cmd)
			return err
		},
		reported: n.budgets.Reported, log: n.log})
}

// reportSink is where flushReports takes spend reports from and sends them.
type reportSink struct {
	node     string
	ledger   *ledger.Ledger
	state    func() *raftstore.State
	propose  func(ctx context.Context, cmd *pb.Command) error
	reported func([]*pb.BudgetUse)
	log      interface {
		Warn(msg string, args ...any)
		Error(msg string, args ...any)
	}
}

// flushReports sends the ledger's reports, each as spend report entries of
// at most raftstore.MaxSpendReportItems items with consecutive seqs from
// the report's own (see reportChunks); it stops at the first failure and
// returns the size of the entries applied. Once a report's last chunk is
// applied the ledger's next seq is raised above it, the report is
// acknowledged and its budget use leaves the node's unreported spend
// (until then the chunks applied count twice locally: in the shrunk lease
// and as unreported — the safe side).
//
// A flush sends at most two reports: the oldest unacknowledged one (left by
// a failure or a restart) and one cut after it. Under steady traffic spend
// piles up again while a report is on its way; it waits for the next
// report, so that a busy node does not report back to back.
func flushReports(ctx context.Context, s reportSink) (bytes int) {
	for range maxReportsPerFlush {
		if ctx.Err() != nil {
			return bytes
		}
		rep, err := s.ledger.NextReport()
		if err != nil {
			s.log.Error("ledger: next spend report", "err", err)
			return bytes
		}
		if rep == nil {
			return bytes
		}
		chunks := reportChunks(s.node, rep, raftstore.MaxSpendReportItems)
		for _, c := range chunks {
			if c.GetSeq() <= s.state().NodeSeq(s.node) {
				continue // applied before a failure or a restart
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			cmd := &pb.Command{Op: &pb.Command_SpendReport{SpendReport: c}}
			err = s.propose(cctx, cmd)
			cancel()
			if err != nil {
				if !errors.Is(err, raftstore.ErrNotLeader) {
					s.log.Warn("spend report not applied; will retry", "seq", c.GetSeq(), "err", err)
				}
				return bytes
			}
			bytes += proto.Size(cmd)
		}
		// The next report the ledger cuts must come after the last chunk.
		s.ledger.SetMinSeq(chunks[len(chunks)-1].GetSeq())
		if err := s.ledger.AckReport(rep.Seq); err != nil {
			s.log.Error("ledger: ack spend report", "seq", rep.Seq, "err", err)
			return bytes
		}
		s.reported(rep.Budgets)
	}
	return bytes
}

// maxReportsPerFlush: see flushReports.
const maxReportsPerFlush = 2

// reportChunks splits rep into spend report commands of at most limit
// rollups plus budget uses each, numbered rep.Seq, rep.Seq+1, …: the same
// report always splits the same way, so a chunk resent after a failure or
// a restart carries its first seq again and the state machine counts it
// once. A report with nothing in it is one empty command.
func reportChunks(node string, rep *ledger.Report, limit int) []*pb.SpendReportCommand {
	rollups, budgets := rep.Rollups, rep.Budgets
	out := make([]*pb.SpendReportCommand, 0, 1+(len(rollups)+len(budgets))/limit)
	for seq := rep.Seq; len(out) == 0 || len(rollups)+len(budgets) > 0; seq++ {
		c := &pb.SpendReportCommand{Node: node, Seq: seq}
		nr := min(len(rollups), limit)
		c.Rollups, rollups = rollups[:nr:nr], rollups[nr:]
		nb := min(len(budgets), limit-nr)
		c.Budgets, budgets = budgets[:nb:nb], budgets[nb:]
		out = append(out, c)
	}
	return out
}

// newBudgets returns the budget manager, with the spend the ledger holds
// but Raft has not counted yet.
func (n *Node) newBudgets() *budget.Manager {
	m := budget.New(budget.Config{NodeID: n.cfg.NodeID, State: n.store, Logger: n.log, ProposeResult: n.propose})
	m.Restore(n.ledger.Unreported())
	return m
}

// loadPrices returns the built-in price table, or the one in path. The
// built-in one is parsed in the background (it takes tens of milliseconds)
// so that it does not delay readiness.
func loadPrices(path string) (func() *prices.Table, error) {
	if path == "" {
		go prices.Builtin()
		return prices.Builtin, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	defer f.Close()
	t, err := prices.Load(f)
	if err != nil {
		return nil, fmt.Errorf("price table %s: %w", path, err)
	}
	return func() *prices.Table { return t }, nil
}

// apiPrice answers the admin API's price question.
func (p pricing) apiPrice(kind, baseURL, model string, override *pb.Price) (*pb.Price, string) {
	pr, src, ok := p.priceOf(kind, baseURL, model, override)
	if !ok {
		return nil, src
	}
	out := &pb.Price{InputMicrosPerMtok: pr.InputMicros, OutputMicrosPerMtok: pr.OutputMicros,
		CachedInputMicrosPerMtok: pr.CachedInputMicros, CacheWriteMicrosPerMtok: pr.CacheWriteMicros}
	for _, t := range pr.Tiers {
		out.Tiers = append(out.Tiers, &pb.PriceTier{AbovePromptTokens: t.Above, InputMicrosPerMtok: t.InputMicros,
			OutputMicrosPerMtok: t.OutputMicros, CachedInputMicrosPerMtok: t.CachedInputMicros, CacheWriteMicrosPerMtok: t.CacheWriteMicros})
	}
	return out, src
}
