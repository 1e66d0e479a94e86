package raftstore

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func keyIDs(keys []*pb.StoredKey) []string {
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.GetKey().GetId())
	}
	return ids
}

// TestKeysPageWalksKeysInCreationOrder pages through keys created at
// increasing times (and two at the same time, ordered by id): the pages
// concatenate to Keys, an update does not move a key, and a cursor that
// names no key starts over.
func TestKeysPageWalksKeysInCreationOrder(t *testing.T) {
	h := newHarness(t)
	h.must(createKeyCmd("k_c", "sc"), createKeyCmd("k_a", "sa"))
	h.must(at(createKeyCmd("k_z", "sz"), h.now+1e9), at(createKeyCmd("k_b", "sb"), h.now+1e9))
	h.now += 1e9
	h.must(createKeyCmd("k_d", "sd"))
	h.must(updateKeyCmd(&pb.UpdateKeyRequest{Id: "k_c", Name: proto.String("renamed")}), rotateKeyCmd("k_a", "sa2"))
	st := h.state()
	want := []string{"k_c", "k_a", "k_b", "k_z", "k_d"}
	if got := keyIDs(st.Keys()); !slices.Equal(got, want) {
		t.Fatalf("Keys = %v, want %v", got, want)
	}
	var paged []string
	after := ""
	for range 10 {
		page := st.KeysPage(after, 2)
		paged = append(paged, keyIDs(page)...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].GetKey().GetId()
	}
	if !slices.Equal(paged, want) {
		t.Errorf("pages = %v, want %v", paged, want)
	}
	if got := keyIDs(st.KeysPage("nope", 1)); !slices.Equal(got, want[:1]) {
		t.Errorf("unknown cursor: %v", got)
	}
	if st.KeysPage("", 0) != nil || st.KeyCount() != 5 {
		t.Error("limit 0 or KeyCount wrong")
	}
	if st.Key("k_c").GetKey().GetName() != "renamed" || st.KeyByHash(HashSecret("sa")) != nil || st.KeyByHash(HashSecret("sa2")) == nil {
		t.Error("update or rotation not visible through the indexes")
	}
}

// TestKeysOfTeamFollowsMoves moves keys between teams: the team index
// follows every update, and a team that still has keys cannot be deleted.
func TestKeysOfTeamFollowsMoves(t *testing.T) {
	h := newHarness(t)
	h.must(teamCmd("t1", nil), teamCmd("t2", nil), teamCmd("t10", nil))
	for i := range 4 {
		c := createKeyCmd(fmt.Sprintf("k%d", i), fmt.Sprintf("s%d", i))
		c.GetCreateKey().Key.Key.TeamId = "t1"
		h.must(c)
	}
	h.must(updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", TeamId: proto.String("t2")}),
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k2", TeamId: proto.String("")}),
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k3", TeamId: proto.String("t10")}))
	st := h.state()
	for team, want := range map[string][]string{"t1": {"k0"}, "t2": {"k1"}, "t10": {"k3"}} {
		if got := st.KeysOfTeam(team); !slices.Equal(got, want) {
			t.Errorf("KeysOfTeam(%s) = %v, want %v", team, got, want)
		}
	}
	if _, err := h.apply(&pb.Command{Op: &pb.Command_DeleteTeam{DeleteTeam: &pb.DeleteTeamCommand{Id: "t2"}}}); err == nil {
		t.Error("deleted a team that has a key")
	}
	h.must(updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", TeamId: proto.String("")}),
		&pb.Command{Op: &pb.Command_DeleteTeam{DeleteTeam: &pb.DeleteTeamCommand{Id: "t2"}}})
	if h.state().Team("t2") != nil || h.state().TeamConfig("t1") == nil || len(h.state().Teams()) != 2 {
		t.Error("team delete not applied")
	}
}

// TestReleaseNodeUsesLeaseIndex releases a node's leases across several
// budgets: exactly its leases go, the other nodes' stay, and the index
// forgets the node.
func TestReleaseNodeUsesLeaseIndex(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.must(teamCmd(fmt.Sprintf("t%d", i), &pb.Budget{LimitNanos: 1000, Period: PeriodTotal}))
		h.must(grantCmd("a", TeamBudgetID(fmt.Sprintf("t%d", i)), 0, 100))
		if i%2 == 0 {
			h.must(grantCmd("b", TeamBudgetID(fmt.Sprintf("t%d", i)), 0, 100))
		}
	}
	h.must(&pb.Command{Op: &pb.Command_ReleaseNode{ReleaseNode: &pb.ReleaseNodeCommand{Node: "b"}}})
	st := h.state()
	for i := range 5 {
		bp := st.BudgetPeriod(TeamBudgetID(fmt.Sprintf("t%d", i)), 0)
		if _, ok := bp.GetLeases()["b"]; ok || bp.GetLeases()["a"] != 100 {
			t.Errorf("t%d after release: %v", i, bp.GetLeases())
		}
	}
	if n := countPrefix(st, "b"); n != 0 {
		t.Errorf("lease index still has %d entries for b", n)
	}
	if n := countPrefix(st, "a"); n != 5 {
		t.Errorf("lease index has %d entries for a, want 5", n)
	}
}

// countPrefix counts the lease index entries of node.
func countPrefix(st *State, node string) int {
	n := 0
	st.leasesByNode.ascend(func(it leaseItem) bool {
		if it.node == node {
			n++
		}
		return true
	})
	return n
}

// TestGrantPrunesOnlyOldPeriodsOfItsBudget grants in successive daily
// periods: a budget keeps its current and previous period, older ones go,
// and another budget whose id extends this one's is untouched.
func TestGrantPrunesOnlyOldPeriodsOfItsBudget(t *testing.T) {
	h := newHarness(t)
	h.must(teamCmd("t", &pb.Budget{LimitNanos: 1000, Period: PeriodDay}), teamCmd("tt", &pb.Budget{LimitNanos: 1000, Period: PeriodDay}))
	day := int64(86400)
	h.must(grantCmd("a", TeamBudgetID("tt"), 0, 10))
	for d := range int64(5) {
		h.must(grantCmd("a", TeamBudgetID("t"), d*day, 10))
	}
	st := h.state()
	for d := range int64(5) {
		if got, want := st.BudgetPeriod(TeamBudgetID("t"), d*day) != nil, d >= 3; got != want {
			t.Errorf("period of day %d kept = %v, want %v", d, got, want)
		}
	}
	if st.BudgetPeriod(TeamBudgetID("tt"), 0) == nil {
		t.Error("pruned another budget's period")
	}
	if n := countPrefix(st, "a"); n != 3 {
		t.Errorf("lease index has %d entries, want 3", n)
	}
}

// TestGrantLeasesInOneEntry grants leases of several budgets in one entry:
// each grant applies as a single one would (the limit holds within the
// entry too), an unknown budget fails alone, and the outcomes come in
// order.
func TestGrantLeasesInOneEntry(t *testing.T) {
	h := newHarness(t)
	h.must(teamCmd("t1", &pb.Budget{LimitNanos: 1000, Period: PeriodTotal}), teamCmd("t2", &pb.Budget{LimitNanos: 500, Period: PeriodTotal}))
	grant := func(node, budget string, want int64) *pb.GrantLeaseCommand {
		return grantCmd(node, budget, 0, want).GetGrantLease()
	}
	v := h.must(&pb.Command{Op: &pb.Command_GrantLeases{GrantLeases: &pb.GrantLeasesCommand{Grants: []*pb.GrantLeaseCommand{
		grant("a", TeamBudgetID("t1"), 600), grant("b", TeamBudgetID("t1"), 600), grant("a", "team:nope", 10), grant("a", TeamBudgetID("t2"), 100),
	}}}}).(*pb.GrantLeasesResult)
	out := v.GetOutcomes()
	if len(out) != 4 || out[0].GetPeriod().GetLeases()["a"] != 600 || out[1].GetPeriod().GetLeases()["b"] != 400 ||
		!strings.Contains(out[2].GetError(), "does not exist") || out[3].GetPeriod().GetLeases()["a"] != 100 {
		t.Fatalf("outcomes %v", out)
	}
	st := h.state()
	if bp := st.BudgetPeriod(TeamBudgetID("t1"), 0); bp.GetLeases()["a"]+bp.GetLeases()["b"] != 1000 {
		t.Fatalf("t1 leases %v", bp.GetLeases())
	}
	if countPrefix(st, "a") != 2 || countPrefix(st, "b") != 1 {
		t.Error("lease index not kept")
	}
}
