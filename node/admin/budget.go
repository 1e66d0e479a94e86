package admin

import (
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// budgetStatus returns the state of budget id (configured as b) in the
// period that contains now, from the replicated accounting in st; nil when
// b is nil. The admin API is where the clock is read: the state machine
// only knows the period starts the nodes report.
func budgetStatus(st *raftstore.State, id string, b *pb.Budget, now time.Time) *pb.BudgetStatus {
	if b == nil {
		return nil
	}
	start := raftstore.PeriodStart(b.GetPeriod(), now)
	bs := &pb.BudgetStatus{
		LimitNanos:  b.GetLimitNanos(),
		Period:      b.GetPeriod(),
		PeriodStart: start,
		ResetAt:     raftstore.PeriodReset(b.GetPeriod(), start),
	}
	if bp := st.BudgetPeriod(id, start); bp != nil {
		bs.SpentNanos = bp.GetSpentNanos()
		for _, l := range bp.GetLeases() {
			bs.LeasedNanos += l
		}
	}
	bs.RemainingNanos = max(bs.LimitNanos-bs.SpentNanos, 0)
	return bs
}
