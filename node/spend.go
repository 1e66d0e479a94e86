package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/tollgate/tollgate/ledger"
	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing/prices"
)

// pricing prices deployments: a deployment's own price overrides the
// table.
type pricing struct{ table func() *prices.Table }

// priceOf returns d's price and where it comes from.
func (p pricing) priceOf(kind, baseURL, model string, override *pb.Price) (prices.Price, string, bool) {
	if override != nil {
		return prices.Price{InputMicros: override.GetInputMicrosPerMtok(), OutputMicros: override.GetOutputMicrosPerMtok(),
			CachedInputMicros: override.GetCachedInputMicrosPerMtok()}, "override", true
	}
	m, ok := p.table().Lookup(kind, baseURL, model)
	if !ok {
		return prices.Price{}, "unknown", false
	}
	return m.Price, "built-in " + m.Provider + "/" + m.Model, true
}

// Cost implements proxy.Pricing.
func (p pricing) Cost(d *raftstore.Deployment, prompt, completion, cached int64) (int64, bool) {
	pr, _, ok := p.priceOf(d.Provider, d.BaseURL, d.UpstreamModel, d.Price)
	if !ok {
		return 0, false
	}
	return pr.Cost(prompt, completion, cached), true
}

// MaxCost implements proxy.Pricing: Cost at the dearest price d's model
// has at any time of day or after any announced change.
func (p pricing) MaxCost(d *raftstore.Deployment, prompt, completion int64) (int64, bool) {
	if d.Price != nil {
		return p.Cost(d, prompt, completion, 0)
	}
	b, ok := p.table().LookupBound(d.Provider, d.BaseURL, d.UpstreamModel)
	if !ok {
		return 0, false
	}
	return b.Cost(prompt, completion, 0), true
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
		CompletionTokens: rec.Usage.CompletionTokens, CachedTokens: rec.Usage.CachedTokens,
		CostNanos: rec.CostNanos, Unpriced: rec.Unpriced, Status: int32(rec.Status),
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !n.ready.Load() {
			continue
		}
		if !seeded {
			n.ledger.SetMinSeq(n.store.State().NodeSeq(n.cfg.NodeID))
			seeded = true
		}
		n.flushSpend(ctx)
	}
}

// flushSpend sends every pending report; it stops at the first failure
// (the next tick retries the same report).
func (n *Node) flushSpend(ctx context.Context) {
	for ctx.Err() == nil {
		rep, err := n.ledger.NextReport()
		if err != nil {
			n.log.Error("ledger: next spend report", "err", err)
			return
		}
		if rep == nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = n.propose(cctx, &pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{
			Node: n.cfg.NodeID, Seq: rep.Seq, Rollups: rep.Rollups, Budgets: rep.Budgets}}})
		cancel()
		if err != nil {
			if !errors.Is(err, raftstore.ErrNotLeader) {
				n.log.Warn("spend report not applied; will retry", "seq", rep.Seq, "err", err)
			}
			return
		}
		if err := n.ledger.AckReport(rep.Seq); err != nil {
			n.log.Error("ledger: ack spend report", "seq", rep.Seq, "err", err)
			return
		}
		n.budgets.Reported(rep.Budgets)
	}
}

// newBudgets returns the budget manager, with the spend the ledger holds
// but Raft has not counted yet.
func (n *Node) newBudgets() *budget.Manager {
	m := budget.New(budget.Config{NodeID: n.cfg.NodeID, State: n.store, Logger: n.log,
		Propose: func(ctx context.Context, cmd *pb.Command) error {
			_, err := n.propose(ctx, cmd)
			return err
		}})
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
	return &pb.Price{InputMicrosPerMtok: pr.InputMicros, OutputMicrosPerMtok: pr.OutputMicros,
		CachedInputMicrosPerMtok: pr.CachedInputMicros}, src
}
