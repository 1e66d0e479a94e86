package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// leaseOf returns node's lease of a total budget in tn's state.
func leaseOf(tn *tnode, budgetID, node string) int64 {
	return tn.n.Store().State().BudgetPeriod(budgetID, 0).GetLeases()[node]
}

// The leader returns the budget leases of a node it removes after the
// dead-node grace; tollctl cluster remove of a node that is no longer a
// member returns what it still holds.
func TestRemovedNodesReturnTheirLeases(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, func(c *Config) { c.DeadNodeGrace = time.Second })
	leader, followers := split(t, nodes)
	victim, stays := followers[0], followers[1]
	key, err := stays.keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: "budgeted",
		Budget: &pb.Budget{LimitNanos: 1_000_000_000, Period: raftstore.PeriodTotal}})
	if err != nil {
		t.Fatal(err)
	}
	budgetID := raftstore.KeyBudgetID(key.GetKey().GetId())
	eventually(t, 5*time.Second, "the victim to see the key", func() error {
		if victim.n.Store().State().BudgetLimit(budgetID) == nil {
			return fmt.Errorf("no budget %s yet", budgetID)
		}
		return nil
	})
	lim := victim.n.Store().State().BudgetLimit(budgetID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := victim.n.budgets.Reserve(ctx, []*raftstore.Limit{lim}, 1_000_000, time.Now()); err != nil {
		t.Fatal(err)
	}
	if l := leaseOf(leader, budgetID, victim.id); l <= 0 {
		t.Fatalf("victim holds no lease (%d)", l)
	}

	victim.crash()
	eventually(t, 30*time.Second, "the dead node removed and its lease returned", func() error {
		srvs, err := leader.n.Store().Servers()
		if err != nil {
			return err
		}
		for _, s := range srvs {
			if s.ID == victim.id {
				return fmt.Errorf("still a member")
			}
		}
		if l := leaseOf(leader, budgetID, victim.id); l != 0 {
			return fmt.Errorf("removed, but its lease of %d is still counted", l)
		}
		return nil
	})

	// A node removed earlier that still holds a lease (here granted
	// directly): removing it again returns the lease.
	if _, err := leader.n.Store().Apply(ctx, &pb.Command{Op: &pb.Command_GrantLease{GrantLease: &pb.GrantLeaseCommand{
		Node: "gone", Budget: budgetID, PeriodStart: 0, WantNanos: 5_000_000}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stays.cluster().RemoveNode(adminCtx(t), &pb.RemoveNodeRequest{Id: "gone"})
	if err != nil {
		t.Fatalf("remove a node that is no longer a member: %v", err)
	}
	if !resp.GetNotMember() {
		t.Error("not_member is false for a node that is not a member")
	}
	if l := leaseOf(stays, budgetID, "gone"); l != 0 {
		t.Errorf("lease of %d still counted after the remove returned", l)
	}
}
