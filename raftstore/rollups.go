package raftstore

import (
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Retention bounds the spend history the state keeps: hourly rollups for
// Hourly, then folded into daily rollups kept for Daily (from the day's
// start), then dropped. The clock is the leader-stamped time of the spend
// reports that carry the rollups, so every replica folds and drops the same
// rows at the same entry. Every node of a cluster must use the same
// retention, or their histories (never their budgets) differ.
type Retention struct {
	Hourly, Daily time.Duration
}

// DefaultRetention keeps 35 days of hourly and 400 days of daily rollups.
var DefaultRetention = Retention{Hourly: 35 * 24 * time.Hour, Daily: 400 * 24 * time.Hour}

// compactStep bounds the rollups one spend report folds or drops, so that
// no single apply is slow; reports come every few seconds, which keeps up
// with any realistic number of new rollups per hour.
const compactStep = 256

const daySeconds = 86400

func (r Retention) orDefault() Retention {
	if r.Hourly <= 0 {
		r.Hourly = DefaultRetention.Hourly
	}
	if r.Daily <= 0 {
		r.Daily = DefaultRetention.Daily
	}
	return r
}

// compactRollups commits the hourly rollups txn into s after folding, at
// most compactStep of them, the hourly rollups older than the hourly
// retention into daily ones, and dropping at most compactStep daily
// rollups older than the daily retention.
func compactRollups(s *State, hourly *ptxn[*pb.SpendRollup], nowNanos int64) {
	r := s.retention.orDefault()
	now := nowNanos / 1e9
	hourCutoff, dayCutoff := now-int64(r.Hourly/time.Second), now-int64(r.Daily/time.Second)
	var daily *ptxn[*pb.SpendRollup]
	for range compactStep {
		old, ok := hourly.min()
		if !ok || old.GetHourUnix() >= hourCutoff {
			break
		}
		hourly.delete(old)
		if daily == nil {
			daily = s.daily.txn()
		}
		addToDaily(daily, old)
	}
	s.rollups = hourly.commit()
	for range compactStep {
		t := s.daily
		if daily != nil {
			t = daily.ptree
		}
		old, ok := t.min()
		if !ok || old.GetHourUnix()+daySeconds > dayCutoff {
			break
		}
		if daily == nil {
			daily = s.daily.txn()
		}
		daily.delete(old)
	}
	if daily != nil {
		s.daily = daily.commit()
	}
}

// addToDaily adds an hourly rollup to the daily rollup of its day.
func addToDaily(daily *ptxn[*pb.SpendRollup], h *pb.SpendRollup) {
	day := h.GetHourUnix() - h.GetHourUnix()%daySeconds
	d := &pb.SpendRollup{HourUnix: day, KeyId: h.GetKeyId(), TeamId: h.GetTeamId(), Model: h.GetModel()}
	if old, ok := daily.get(d); ok {
		d = proto.Clone(old).(*pb.SpendRollup)
	}
	addRollup(d, h)
	daily.put(d)
}

func addRollup(dst, d *pb.SpendRollup) {
	dst.Requests += d.GetRequests()
	dst.PromptTokens += d.GetPromptTokens()
	dst.CompletionTokens += d.GetCompletionTokens()
	dst.CachedTokens += d.GetCachedTokens()
	dst.CacheWriteTokens += d.GetCacheWriteTokens()
	dst.CostNanos += d.GetCostNanos()
	dst.UnpricedRequests += d.GetUnpricedRequests()
}

// WalkRollups calls fn, until it returns false, for every rollup in the
// range [since, until) (Unix seconds): first the daily rollups (older than
// the hourly retention; HourUnix is the day's start) of every day the range
// touches, so over daily rows a range widens to whole days; then the hourly
// rollups whose hour starts in the range. Each kind comes in time order.
// The rollups must not be modified.
func (s *State) WalkRollups(since, until int64, fn func(*pb.SpendRollup) bool) {
	if walkTree(s.daily, since-daySeconds+1, until, fn) {
		walkTree(s.rollups, since, until, fn)
	}
}

// walkTree reports whether fn wanted more.
func walkTree(t ptree[*pb.SpendRollup], since, until int64, fn func(*pb.SpendRollup) bool) bool {
	more := true
	t.ascendFrom(&pb.SpendRollup{HourUnix: max(since, 0)}, func(r *pb.SpendRollup) bool {
		if r.GetHourUnix() >= until {
			return false
		}
		more = fn(r)
		return more
	})
	return more
}
