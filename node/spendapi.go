package node

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/ledger"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// spendAPI implements the SpendService of the admin API.
type spendAPI struct {
	pb.UnimplementedSpendServiceServer
	n *Node
}

// SpendReport sums the replicated hourly rollups: the same answer on
// every node that has applied the same reports.
func (s *spendAPI) SpendReport(ctx context.Context, req *pb.SpendReportRequest) (*pb.SpendReportResponse, error) {
	by := req.GetBy()
	if by == "" {
		by = "model"
	}
	group, ok := map[string]func(*pb.SpendRollup) string{
		"key":   func(r *pb.SpendRollup) string { return r.GetKeyId() },
		"team":  func(r *pb.SpendRollup) string { return r.GetTeamId() },
		"model": func(r *pb.SpendRollup) string { return r.GetModel() },
		"day": func(r *pb.SpendRollup) string {
			return time.Unix(r.GetHourUnix(), 0).UTC().Format("2006-01-02")
		},
		"hour": func(r *pb.SpendRollup) string {
			return time.Unix(r.GetHourUnix(), 0).UTC().Format("2006-01-02T15:00Z")
		},
	}[by]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "cannot group by %q: use key, team, model, day or hour", by)
	}
	until := req.GetUntil()
	if until <= 0 {
		until = time.Now().Unix() + 3600
	}
	since := req.GetSince() / 3600 * 3600 // the hour that contains since
	rows := map[string]*pb.SpendReportRow{}
	total := &pb.SpendReportRow{Group: "total"}
	s.n.store.State().WalkRollups(since, until, func(r *pb.SpendRollup) bool {
		if (req.GetKeyId() != "" && r.GetKeyId() != req.GetKeyId()) || (req.GetTeamId() != "" && r.GetTeamId() != req.GetTeamId()) {
			return true
		}
		g := group(r)
		row := rows[g]
		if row == nil {
			row = &pb.SpendReportRow{Group: g}
			rows[g] = row
		}
		for _, x := range []*pb.SpendReportRow{row, total} {
			x.Requests += r.GetRequests()
			x.PromptTokens += r.GetPromptTokens()
			x.CompletionTokens += r.GetCompletionTokens()
			x.CachedTokens += r.GetCachedTokens()
			x.CacheWriteTokens += r.GetCacheWriteTokens()
			x.CostNanos += r.GetCostNanos()
			x.UnpricedRequests += r.GetUnpricedRequests()
		}
		return ctx.Err() == nil
	})
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	resp := &pb.SpendReportResponse{Total: total}
	for _, r := range rows {
		resp.Rows = append(resp.Rows, r)
	}
	sort.Slice(resp.Rows, func(i, j int) bool {
		a, b := resp.Rows[i], resp.Rows[j]
		if by == "day" || by == "hour" {
			return a.Group < b.Group
		}
		if a.CostNanos != b.CostNanos {
			return a.CostNanos > b.CostNanos
		}
		return a.Group < b.Group
	})
	return resp, nil
}

func ledgerQuery(q *pb.SpendLogsRequest) ledger.Query {
	limit := int(q.GetLimit())
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 10000)
	lq := ledger.Query{KeyID: q.GetKeyId(), TeamID: q.GetTeamId(), Limit: limit, Model: q.GetModel(), ErrorsOnly: q.GetErrorsOnly()}
	if q.GetSince() > 0 {
		lq.Since = time.Unix(q.GetSince(), 0)
	}
	return lq
}

// NodeLogs returns this node's newest raw records.
func (s *spendAPI) NodeLogs(ctx context.Context, req *pb.NodeLogsRequest) (*pb.NodeLogsResponse, error) {
	recs, err := s.n.ledger.Query(ctx, ledgerQuery(req.GetQuery()))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "ledger query: %v", err)
	}
	return &pb.NodeLogsResponse{Records: recs}, nil
}

// SpendLogs asks every live node for its newest records and merges them,
// newest first; nodes that cannot answer are named.
func (s *spendAPI) SpendLogs(ctx context.Context, req *pb.SpendLogsRequest) (*pb.SpendLogsResponse, error) {
	n := s.n
	q := ledgerQuery(req)
	local, err := n.ledger.Query(ctx, q)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "ledger query: %v", err)
	}
	resp := &pb.SpendLogsResponse{Records: local}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ms := n.gossip.snapshot()
	cctx, cancel := context.WithTimeout(n.internalContext(ctx), 5*time.Second)
	defer cancel()
	for _, id := range sortedIDs(ms) {
		m := ms[id]
		if id == n.cfg.NodeID || !m.parsed || m.meta.Admin == "" {
			continue
		}
		if m.state != "alive" && m.state != "suspect" {
			resp.UnreachableNodes = append(resp.UnreachableNodes, id)
			continue
		}
		wg.Add(1)
		go func(id, addr string) {
			defer wg.Done()
			conn, err := n.peers.conn(addr)
			var r *pb.NodeLogsResponse
			if err == nil {
				r, err = pb.NewSpendServiceClient(conn).NodeLogs(cctx, &pb.NodeLogsRequest{Query: req})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				resp.UnreachableNodes = append(resp.UnreachableNodes, id)
				return
			}
			resp.Records = append(resp.Records, r.GetRecords()...)
		}(id, m.meta.Admin)
	}
	wg.Wait()
	sort.Strings(resp.UnreachableNodes)
	sort.SliceStable(resp.Records, func(i, j int) bool {
		a, b := resp.Records[i], resp.Records[j]
		if a.GetUnixNanos() != b.GetUnixNanos() {
			return a.GetUnixNanos() > b.GetUnixNanos()
		}
		return strings.Compare(a.GetRequestId(), b.GetRequestId()) < 0
	})
	if len(resp.Records) > q.Limit {
		resp.Records = resp.Records[:q.Limit]
	}
	return resp, nil
}
