package raftstore

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// periodsState returns a state with n team budgets, each with a current
// period in which node n1 holds a lease, built directly.
func periodsState(n int, start int64) *State {
	st := emptyState()
	st.Index = 1
	teams := st.teams.txn()
	pw := st.periodWriter()
	for i := range n {
		id := fmt.Sprintf("team_%07d", i)
		teams.put(newTeamEntry(&pb.Team{Id: id, Name: id, Budget: &pb.Budget{LimitNanos: 1e12, Period: PeriodMonth}}))
		b := TeamBudgetID(id)
		pw.put(&pb.BudgetPeriod{Budget: b, PeriodStart: start, SpentNanos: 1e6, Leases: map[string]int64{"n1": 1e6}})
	}
	st.teams = teams.commit()
	pw.commit(st)
	return st
}

// BenchmarkFSMGrantLease applies one GrantLease entry to a state holding n
// budget periods: a grant touches only the period it names.
func BenchmarkFSMGrantLease(b *testing.B) {
	const start = 1_796_083_200
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("periods=%d", n), func(b *testing.B) {
			f := newFSM()
			base := periodsState(n, start)
			cmd := grantCmd("n2", TeamBudgetID(fmt.Sprintf("team_%07d", n/2)), start, 1e6)
			data, err := proto.Marshal(at(cmd, baseNanos))
			if err != nil {
				b.Fatal(err)
			}
			l := &raft.Log{Index: 2, Type: raft.LogCommand, Data: data}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f.state.Store(base)
				if res := f.Apply(l).(*applyResult); res.err != nil {
					b.Fatal(res.err)
				}
			}
		})
	}
}

// BenchmarkFSMSpendReport applies one spend report settling 100 budgets
// and 100 hourly rollups to a state holding n budget periods: the cost
// follows the report's size, not the state's.
func BenchmarkFSMSpendReport(b *testing.B) {
	const start = 1_796_083_200
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("periods=%d", n), func(b *testing.B) {
			f := newFSM()
			base := periodsState(n, start)
			c := &pb.SpendReportCommand{Node: "n1", Seq: 1}
			hour := baseNanos / 1e9 / 3600 * 3600
			for i := range 100 {
				id := fmt.Sprintf("team_%07d", i*(n/100))
				c.Budgets = append(c.Budgets, &pb.BudgetUse{Budget: TeamBudgetID(id), PeriodStart: start, SpentNanos: 1000})
				c.Rollups = append(c.Rollups, &pb.SpendRollup{HourUnix: hour, KeyId: id, Model: "m", Requests: 1, CostNanos: 1000})
			}
			data, err := proto.Marshal(at(&pb.Command{Op: &pb.Command_SpendReport{SpendReport: c}}, baseNanos))
			if err != nil {
				b.Fatal(err)
			}
			l := &raft.Log{Index: 2, Type: raft.LogCommand, Data: data}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f.state.Store(base)
				if res := f.Apply(l).(*applyResult); res.err != nil {
					b.Fatal(res.err)
				}
			}
		})
	}
}
