package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// A follower proposes a batch of lease requests (GrantLeases) through the
// leader's internal API; while a member advertises a release that does not
// apply GrantLeases, the leader refuses it and the follower sees
// ErrCommandRefused (its budget manager then asks one by one).
func TestFollowerProposesGrantLeasesUnlessAMemberCannotApplyIt(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := split(t, nodes)
	asker, old := followers[0], followers[1]
	var ids []string
	for i := range 3 {
		key, err := leader.keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: fmt.Sprintf("b%d", i),
			Budget: &pb.Budget{LimitNanos: 1_000_000, Period: raftstore.PeriodTotal}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, raftstore.KeyBudgetID(key.GetKey().GetId()))
	}
	grants := func(want int64) *pb.Command {
		c := &pb.GrantLeasesCommand{}
		for _, id := range ids {
			c.Grants = append(c.Grants, &pb.GrantLeaseCommand{Node: asker.id, Budget: id, WantNanos: want})
		}
		return &pb.Command{Op: &pb.Command_GrantLeases{GrantLeases: c}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := retryUnavailable(10*time.Second, func() error { _, err := asker.n.propose(ctx, grants(1_000)); return err }); err != nil {
		t.Fatalf("GrantLeases through the leader: %v", err)
	}
	for _, id := range ids {
		if l := leaseOf(asker, id, asker.id); l != 1_000 {
			t.Fatalf("lease of %s is %d after the batch, want 1000", id, l)
		}
	}

	num := strconv.Itoa(int(commandOneof.Fields().ByName("grant_leases").Number()))
	cmds := strings.Trim(strings.ReplaceAll(","+commandsMeta()+",", ","+num+",", ","), ",")
	old.n.gossip.changeMeta(func(m *memberMeta) { m.Version, m.Cmds = "v0.9", cmds })
	eventually(t, 10*time.Second, "the leader to hear "+old.id+"'s release", func() error {
		if m := leader.n.gossip.snapshot()[old.id].meta; m.Cmds != cmds {
			return fmt.Errorf("leader sees %q", m.Cmds)
		}
		return nil
	})
	_, err := asker.n.propose(ctx, grants(500))
	if !errors.Is(err, raftstore.ErrCommandRefused) || !strings.Contains(err.Error(), "grant_leases") {
		t.Fatalf("GrantLeases while %s cannot apply it: %v, want ErrCommandRefused", old.id, err)
	}
	if l := leaseOf(asker, ids[0], asker.id); l != 1_000 {
		t.Fatalf("refused batch changed a lease to %d", l)
	}
	// A lone lease request goes as GrantLease, which every release applies.
	lim := asker.n.Store().State().BudgetLimit(ids[1])
	if _, err := asker.n.budgets.Reserve(ctx, []*raftstore.Limit{lim}, 5_000, time.Now()); err != nil {
		t.Fatalf("reserve while GrantLeases is refused: %v", err)
	}
}
