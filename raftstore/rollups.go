package raftstore

import (
	"encoding/binary"
	"time"

	iradix "github.com/hashicorp/go-immutable-radix"
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
func compactRollups(s *State, hourly *iradix.Txn, nowNanos int64) {
	r := s.retention.orDefault()
	now := nowNanos / 1e9
	hourCutoff, dayCutoff := now-int64(r.Hourly/time.Second), now-int64(r.Daily/time.Second)
	var daily *iradix.Txn
	it := hourly.Root().Iterator()
	var fold [][]byte
	for k, _, ok := it.Next(); ok && len(fold) < compactStep; k, _, ok = it.Next() {
		if int64(binary.BigEndian.Uint64(k[:8])) >= hourCutoff {
			break
		}
		fold = append(fold, k)
	}
	for _, k := range fold {
		v, _ := hourly.Delete(k)
		if daily == nil {
			daily = s.daily.Txn()
		}
		addToDaily(daily, v.(*pb.SpendRollup))
	}
	s.rollups = hourly.CommitOnly()
	dit := s.daily.Root().Iterator()
	var drop [][]byte
	for k, _, ok := dit.Next(); ok && len(drop) < compactStep; k, _, ok = dit.Next() {
		if int64(binary.BigEndian.Uint64(k[:8]))+daySeconds > dayCutoff {
			break
		}
		drop = append(drop, k)
	}
	for _, k := range drop {
		if daily == nil {
			daily = s.daily.Txn()
		}
		daily.Delete(k)
	}
	if daily != nil {
		s.daily = daily.CommitOnly()
	}
}

// addToDaily adds an hourly rollup to the daily rollup of its day.
func addToDaily(daily *iradix.Txn, h *pb.SpendRollup) {
	day := h.GetHourUnix() - h.GetHourUnix()%daySeconds
	d := &pb.SpendRollup{HourUnix: day, KeyId: h.GetKeyId(), TeamId: h.GetTeamId(), Model: h.GetModel()}
	k := rollupKey(d)
	if old, ok := daily.Get(k); ok {
		d = proto.Clone(old.(*pb.SpendRollup)).(*pb.SpendRollup)
	}
	addRollup(d, h)
	daily.Insert(k, d)
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

// WalkRollups calls fn for every rollup with since <= start < until (Unix
// seconds) until fn returns false: first the daily rollups (older than
// the hourly retention; their HourUnix is the day's start, so a range
// resolves to whole days there), then the hourly ones, each in time order.
// The rollups must not be modified.
func (s *State) WalkRollups(since, until int64, fn func(*pb.SpendRollup) bool) {
	if walkTree(s.daily, since, until, fn) {
		walkTree(s.rollups, since, until, fn)
	}
}

// walkTree reports whether fn wanted more.
func walkTree(t *iradix.Tree, since, until int64, fn func(*pb.SpendRollup) bool) bool {
	it := t.Root().Iterator()
	var lo [8]byte
	binary.BigEndian.PutUint64(lo[:], uint64(max(since, 0)))
	it.SeekLowerBound(lo[:])
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		if len(k) >= 8 && int64(binary.BigEndian.Uint64(k[:8])) >= until {
			return true
		}
		if !fn(v.(*pb.SpendRollup)) {
			return false
		}
	}
	return true
}
