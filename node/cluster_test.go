package node

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// checkStatusAll checks that every node's Status names the same leader and
// lists exactly the ids in want, all healthy voters.
func checkStatusAll(t *testing.T, nodes []*tnode, leader string, want ...string) {
	t.Helper()
	for _, tn := range nodes {
		eventually(t, 15*time.Second, tn.id+" status", func() error {
			st, err := tn.cluster().Status(adminCtx(t), &pb.StatusRequest{})
			if err != nil {
				return err
			}
			if st.GetNode() != tn.id {
				return fmt.Errorf("node = %q", st.GetNode())
			}
			if st.GetLeader() != leader {
				return fmt.Errorf("leader = %q, want %q", st.GetLeader(), leader)
			}
			wantState := "follower"
			if tn.id == leader {
				wantState = "leader"
			}
			if st.GetRaftState() != wantState {
				return fmt.Errorf("raft state = %q, want %q", st.GetRaftState(), wantState)
			}
			if len(st.GetMembers()) != len(want) {
				return fmt.Errorf("members = %v, want %v", st.GetMembers(), want)
			}
			for _, id := range want {
				m := memberByID(st, id)
				if m == nil {
					return fmt.Errorf("member %s missing from %v", id, st.GetMembers())
				}
				if m.GetRole() != "voter" || m.GetHealth() != "healthy" || m.GetGossipState() != "alive" || m.GetLeader() != (id == leader) {
					return fmt.Errorf("member %v, want a healthy voter (leader %v)", m, id == leader)
				}
				if m.GetRaftAddress() == "" || m.GetAdminAddress() == "" || m.GetHttpAddress() == "" || m.GetGossipAddress() == "" {
					return fmt.Errorf("member %v lacks an address", m)
				}
			}
			return nil
		})
	}
}

func ids(nodes []*tnode) []string {
	var out []string
	for _, tn := range nodes {
		out = append(out, tn.id)
	}
	return out
}

// Three nodes with BootstrapExpect 3 form one cluster; writes through a
// follower are forwarded and, on return, applied on every node; reads are
// local; the ClusterService works. (One cluster for the checks that leave
// it whole; a follower is removed at the end.)
func TestThreeNodeCluster(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader, followers := split(t, nodes)
	f1, f2 := followers[0], followers[1]

	t.Run("formation", func(t *testing.T) {
		checkStatusAll(t, nodes, leader.id, ids(nodes)...)
		for _, tn := range nodes {
			st := tn.n.Store().State()
			if !st.HasAdminToken(raftstore.HashSecret(testAdminToken)) {
				t.Errorf("%s: admin token not registered", tn.id)
			}
		}
		// Every node stops advertising Fresh once it is a member.
		eventually(t, 5*time.Second, "no node advertises Fresh", func() error {
			for id, m := range leader.n.gossip.snapshot() {
				if m.meta.Fresh {
					return fmt.Errorf("%s is still Fresh", id)
				}
			}
			return nil
		})
		// The leader seeded the demo route once.
		eventually(t, 5*time.Second, "demo route everywhere", func() error {
			for _, tn := range nodes {
				r := tn.n.Store().State().Route("demo")
				if r == nil || len(r.Deployments) != 1 {
					return fmt.Errorf("%s: demo route %+v", tn.id, r)
				}
			}
			return nil
		})
	})

	var keyID, secret string
	t.Run("write forwarding", func(t *testing.T) {
		resp, hdr := createKey(t, f1, "forwarded")
		keyID, secret = resp.GetKey().GetId(), resp.GetSecret()
		h := raftstore.HashSecret(secret)
		// No polling: the write returns once every live node has applied it.
		for _, tn := range nodes {
			k := tn.n.Store().State().KeyByHash(h)
			if k == nil || k.ID != keyID || k.Revoked {
				t.Errorf("%s right after CreateKey returned: KeyByHash = %+v, want key %s", tn.id, k, keyID)
			}
		}
		if v := hdr.Get(mdIndex); len(v) != 1 {
			t.Errorf("%s header = %q, want the index", mdIndex, v)
		} else if idx, err := strconv.ParseUint(v[0], 10, 64); err != nil || idx == 0 {
			t.Errorf("%s header = %q", mdIndex, v)
		}
		if v := hdr.Get(mdLagging); len(v) != 0 {
			t.Errorf("%s header = %q, want none", mdLagging, v)
		}

		var rhdr metadata.MD
		var rev *pb.RevokeKeyResponse
		err := retryUnavailable(5*time.Second, func() error {
			var err error
			rev, err = f2.keys().RevokeKey(adminCtx(t), &pb.RevokeKeyRequest{Id: keyID}, grpc.Header(&rhdr))
			return err
		})
		if err != nil {
			t.Fatalf("RevokeKey through %s: %v", f2.id, err)
		}
		if rev.GetKey().GetRevokedAt() == nil {
			t.Errorf("RevokeKey response %v lacks revoked_at", rev)
		}
		for _, tn := range nodes {
			if k := tn.n.Store().State().KeyByHash(h); k == nil || !k.Revoked {
				t.Errorf("%s right after RevokeKey returned: KeyByHash = %+v, want revoked", tn.id, k)
			}
		}
		if v := rhdr.Get(mdLagging); len(v) != 0 {
			t.Errorf("revoke: %s header = %q, want none", mdLagging, v)
		}

		// A credential and a route through the other follower, then the
		// leader itself.
		if _, err := f2.creds().SetCredential(adminCtx(t), &pb.SetCredentialRequest{Name: "up", Value: "sk-upstream-secret"}); err != nil {
			t.Fatalf("SetCredential through %s: %v", f2.id, err)
		}
		if _, err := leader.models().AddDeployment(adminCtx(t), &pb.AddDeploymentRequest{Model: "m1", Deployment: &pb.Deployment{
			Id: "d1", Provider: "openai-compatible", BaseUrl: "http://127.0.0.1:1/v1", UpstreamModel: "up-m1", Credential: "up",
		}}); err != nil {
			t.Fatalf("AddDeployment through the leader: %v", err)
		}
		for _, tn := range nodes {
			st := tn.n.Store().State()
			r := st.Route("m1")
			if r == nil || len(r.Deployments) != 1 || r.Deployments[0].Credential != "sk-upstream-secret" {
				t.Errorf("%s: route m1 = %+v", tn.id, r)
			}
		}

		// A failed write through a follower returns the leader's error.
		_, err = f1.keys().RevokeKey(adminCtx(t), &pb.RevokeKeyRequest{Id: "no-such-key"})
		if status.Code(err) != codes.NotFound {
			t.Errorf("RevokeKey of a missing key through a follower: %v, want NotFound", err)
		}
		// A write with a bad token is rejected by the follower itself.
		_, err = f1.keys().CreateKey(tokenCtx(t, "tga-bad", 5*time.Second), &pb.CreateKeyRequest{Name: "x"})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("CreateKey with a bad token: %v, want Unauthenticated", err)
		}
	})

	t.Run("reads are local", func(t *testing.T) {
		var hdr metadata.MD
		list, err := f1.keys().ListKeys(adminCtx(t), &pb.ListKeysRequest{IncludeRevoked: true}, grpc.Header(&hdr))
		if err != nil {
			t.Fatalf("ListKeys on %s: %v", f1.id, err)
		}
		if len(list.GetKeys()) != 1 || list.GetKeys()[0].GetId() != keyID {
			t.Errorf("ListKeys on %s = %v, want key %s", f1.id, list.GetKeys(), keyID)
		}
		if v := hdr.Get(mdIndex); len(v) != 0 {
			t.Errorf("a read carries %s %q: it went through the write path", mdIndex, v)
		}
		list, err = f1.keys().ListKeys(adminCtx(t), &pb.ListKeysRequest{})
		if err != nil || len(list.GetKeys()) != 0 {
			t.Errorf("ListKeys without revoked = %v, %v; want none", list, err)
		}
	})

	t.Run("remove leader refused", func(t *testing.T) {
		leader, followers := split(t, nodes)
		f1 := followers[0]
		_, err := f1.cluster().RemoveNode(adminCtx(t), &pb.RemoveNodeRequest{Id: leader.id})
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("RemoveNode(leader) through a follower: %v, want FailedPrecondition", err)
		}
		_, err = leader.cluster().RemoveNode(adminCtx(t), &pb.RemoveNodeRequest{Id: leader.id})
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("RemoveNode(leader) on the leader: %v, want FailedPrecondition", err)
		}
		// Not a member (any more): only its leases, if any, return.
		resp, err := f1.cluster().RemoveNode(adminCtx(t), &pb.RemoveNodeRequest{Id: "nobody"})
		if err != nil || !resp.GetNotMember() {
			t.Errorf("RemoveNode(unknown): %v, %v; want not_member", resp, err)
		}
		_, err = f1.cluster().RemoveNode(adminCtx(t), &pb.RemoveNodeRequest{})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("RemoveNode(\"\"): %v, want InvalidArgument", err)
		}
		srvs, err := leader.n.Store().Servers()
		if err != nil || len(srvs) != 3 {
			t.Errorf("servers after refused removals = %v, %v", srvs, err)
		}
	})

	t.Run("snapshot and restore", func(t *testing.T) {
		saved, err := f2.cluster().SaveSnapshot(adminCtx(t), &pb.SaveSnapshotRequest{})
		if err != nil {
			t.Fatalf("SaveSnapshot: %v", err)
		}
		var snap pb.Snapshot
		if err := proto.Unmarshal(saved.GetData(), &snap); err != nil {
			t.Fatalf("snapshot does not decode: %v", err)
		}
		if len(snap.GetKeys()) != 1 || len(snap.GetRoutes()) != 2 || len(snap.GetCredentials()) != 1 || len(snap.GetAdminTokenHashes()) != 1 {
			t.Fatalf("snapshot has %d keys, %d routes, %d credentials, %d tokens; want 1, 2 (demo, m1), 1, 1",
				len(snap.GetKeys()), len(snap.GetRoutes()), len(snap.GetCredentials()), len(snap.GetAdminTokenHashes()))
		}
		if saved.GetIndex() == 0 || saved.GetIndex() != snap.GetIndex() {
			t.Errorf("SaveSnapshot index %d, snapshot index %d", saved.GetIndex(), snap.GetIndex())
		}
		testRestoreIntoFreshNode(t, saved.GetData(), secret, keyID)
	})

	t.Run("remove follower", func(t *testing.T) {
		leader, followers := split(t, nodes)
		f1, f2 := followers[0], followers[1]
		f2.crash()
		// Until gossip notices the crash the leader would add the node
		// right back (it is alive as far as gossip knows).
		eventually(t, 15*time.Second, "leader sees the crashed node unhealthy", func() error {
			st, err := leader.cluster().Status(adminCtx(t), &pb.StatusRequest{})
			if err != nil {
				return err
			}
			if m := memberByID(st, f2.id); m == nil || m.GetHealth() == "healthy" {
				return fmt.Errorf("member %v", m)
			}
			return nil
		})
		if _, err := f1.cluster().RemoveNode(adminCtx(t), &pb.RemoveNodeRequest{Id: f2.id}); err != nil {
			t.Fatalf("RemoveNode(%s) through %s: %v", f2.id, f1.id, err)
		}
		srvs, err := leader.n.Store().Servers()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range srvs {
			if s.ID == f2.id {
				t.Fatalf("leader's configuration still has %s on return: %v", f2.id, srvs)
			}
		}
		eventually(t, 5*time.Second, "follower sees the removal", func() error {
			srvs, err := f1.n.Store().Servers()
			if err != nil {
				return err
			}
			if len(srvs) != 2 {
				return fmt.Errorf("servers %v", srvs)
			}
			return nil
		})
		// The two remaining nodes still take writes.
		resp, hdr := createKey(t, f1, "after-removal")
		for _, tn := range []*tnode{leader, f1} {
			if tn.n.Store().State().KeyByHash(raftstore.HashSecret(resp.GetSecret())) == nil {
				t.Errorf("%s lacks the key written after the removal", tn.id)
			}
		}
		if v := hdr.Get(mdLagging); len(v) != 0 {
			t.Errorf("%s = %q after the removal", mdLagging, v)
		}
	})
}

// testRestoreIntoFreshNode restores a snapshot of the cluster into a new
// single node with a token of its own.
func testRestoreIntoFreshNode(t *testing.T, data []byte, secret, keyID string) {
	const freshToken = "tga-fresh-node-token"
	cfg := baseConfig(t, "fresh", testLogger(t))
	cfg.AdminToken = freshToken
	cfg.Seed = true
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	fctx := func() context.Context { return tokenCtx(t, freshToken, 10*time.Second) }

	// Something of its own that the restore replaces.
	own, err := tn.keys().CreateKey(fctx(), &pb.CreateKeyRequest{Name: "fresh-only"})
	if err != nil {
		t.Fatalf("CreateKey on the fresh node: %v", err)
	}
	if tn.n.Store().State().Route("demo") == nil {
		t.Fatal("fresh node has no demo route")
	}

	// Garbage is refused and changes nothing.
	before := tn.n.Store().State()
	_, err = tn.cluster().RestoreSnapshot(fctx(), &pb.RestoreSnapshotRequest{Data: []byte("this is not a snapshot")})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("RestoreSnapshot(garbage): %v, want InvalidArgument", err)
	}
	bad, _ := proto.Marshal(&pb.Snapshot{Keys: []*pb.StoredKey{{Key: &pb.Key{Id: "k"}, SecretHash: []byte{1, 2, 3}}}})
	_, err = tn.cluster().RestoreSnapshot(fctx(), &pb.RestoreSnapshotRequest{Data: bad})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("RestoreSnapshot(bad hash length): %v, want InvalidArgument", err)
	}
	after := tn.n.Store().State()
	if !bytes.Equal(contentOf(t, before), contentOf(t, after)) {
		t.Error("a refused restore changed the state")
	}

	resp, err := tn.cluster().RestoreSnapshot(fctx(), &pb.RestoreSnapshotRequest{Data: data})
	if err != nil {
		t.Fatalf("RestoreSnapshot: %v", err)
	}
	if resp.GetKeys() != 1 || resp.GetRoutes() != 2 || resp.GetCredentials() != 1 {
		t.Errorf("RestoreSnapshot = %v, want 1 key, 2 routes, 1 credential", resp)
	}
	st := tn.n.Store().State()
	if k := st.KeyByHash(raftstore.HashSecret(secret)); k == nil || k.ID != keyID || !k.Revoked {
		t.Errorf("restored KeyByHash = %+v, want revoked key %s", k, keyID)
	}
	if st.KeyByHash(raftstore.HashSecret(own.GetSecret())) != nil || st.Key(own.GetKey().GetId()) != nil {
		t.Error("the fresh node's own key survived the restore")
	}
	if r := st.Route("m1"); r == nil || len(r.Deployments) != 1 || r.Deployments[0].Credential != "sk-upstream-secret" {
		t.Errorf("restored route m1 = %+v", r)
	}
	if c := st.Credential("up"); c == nil || c.GetValue() != "sk-upstream-secret" {
		t.Errorf("restored credential = %v", c)
	}
	if !st.HasAdminToken(raftstore.HashSecret(freshToken)) || !st.HasAdminToken(raftstore.HashSecret(testAdminToken)) || st.AdminTokenCount() != 2 {
		t.Errorf("admin tokens after restore: fresh=%v cluster=%v count=%d; want both",
			st.HasAdminToken(raftstore.HashSecret(freshToken)), st.HasAdminToken(raftstore.HashSecret(testAdminToken)), st.AdminTokenCount())
	}
	// Both tokens work, for reads and writes.
	for i, tok := range []string{freshToken, testAdminToken} {
		list, err := tn.keys().ListKeys(tokenCtx(t, tok, 10*time.Second), &pb.ListKeysRequest{IncludeRevoked: true})
		if err != nil || len(list.GetKeys()) != 1+i || list.GetKeys()[0].GetId() != keyID {
			t.Errorf("ListKeys with token %s after restore = %v, %v", tok, list, err)
		}
		if _, err := tn.keys().CreateKey(tokenCtx(t, tok, 10*time.Second), &pb.CreateKeyRequest{Name: "after-restore"}); err != nil {
			t.Errorf("CreateKey with token %s after restore: %v", tok, err)
		}
	}
}

func contentOf(t *testing.T, st *raftstore.State) []byte {
	t.Helper()
	snap := st.Snapshot()
	snap.Index = 0
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Crashing the leader: the two others elect a new one within a few seconds,
// take writes, and report the old leader unhealthy.
func TestLeaderLoss(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	old, survivors := split(t, nodes)
	before, _ := createKey(t, survivors[0], "before")

	old.crash()
	crashed := time.Now()
	var nl *tnode
	eventually(t, 5*time.Second, "a new leader among the survivors", func() error {
		l, err := agreedLeader(survivors)
		nl = l
		return err
	})
	t.Logf("new leader %s after %v", nl.id, time.Since(crashed).Round(time.Millisecond))

	other := without(survivors, nl)[0]
	for _, tn := range []*tnode{other, nl} {
		var resp *pb.CreateKeyResponse
		err := retryUnavailable(5*time.Second, func() error {
			var err error
			resp, err = tn.keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: "after-" + tn.id})
			return err
		})
		if err != nil {
			t.Fatalf("CreateKey through survivor %s: %v", tn.id, err)
		}
		for _, s := range survivors {
			if s.n.Store().State().KeyByHash(raftstore.HashSecret(resp.GetSecret())) == nil {
				t.Errorf("%s lacks the key written through %s on return", s.id, tn.id)
			}
		}
	}
	for _, s := range survivors {
		if s.n.Store().State().KeyByHash(raftstore.HashSecret(before.GetSecret())) == nil {
			t.Errorf("%s lost the key written before the crash", s.id)
		}
	}

	eventually(t, 15*time.Second, "survivor reports the old leader unhealthy", func() error {
		st, err := other.cluster().Status(adminCtx(t), &pb.StatusRequest{})
		if err != nil {
			return err
		}
		// Either survivor may lead by now: on a loaded machine a missed
		// heartbeat can move leadership again, which is not what this
		// test is about.
		if l := st.GetLeader(); l == "" || l == old.id {
			return fmt.Errorf("leader %q, want one of the survivors", l)
		}
		m := memberByID(st, old.id)
		if m == nil {
			return fmt.Errorf("old leader missing from %v", st.GetMembers())
		}
		if m.GetHealth() == "healthy" || m.GetLeader() {
			return fmt.Errorf("old leader %v", m)
		}
		return nil
	})
}

// A follower that gossip has seen dead for DeadNodeGrace is removed from the
// Raft configuration by the leader, not before.
func TestDeadNodeRemoval(t *testing.T) {
	t.Parallel()
	const grace = time.Second
	nodes := startCluster(t, 3, func(c *Config) { c.DeadNodeGrace = grace })
	leader, followers := split(t, nodes)
	victim, stays := followers[0], followers[1]

	victim.crash()
	var deadSince, removedAt time.Time
	eventually(t, 30*time.Second, "leader removes the dead follower", func() error {
		if m, ok := leader.n.gossip.snapshot()[victim.id]; ok && m.state == "dead" && deadSince.IsZero() {
			deadSince = m.since
		}
		srvs, err := leader.n.Store().Servers()
		if err != nil {
			return err
		}
		for _, s := range srvs {
			if s.ID == victim.id {
				return fmt.Errorf("still in %v", srvs)
			}
		}
		removedAt = time.Now()
		return nil
	})
	if deadSince.IsZero() {
		t.Fatal("removed before the leader's gossip saw the node dead")
	}
	if d := removedAt.Sub(deadSince); d < grace {
		t.Errorf("removed %v after gossip saw it dead, before the grace of %v", d, grace)
	}
	// The leader's Status at once, the remaining follower's once the
	// configuration change has reached it.
	for _, tn := range []*tnode{leader, stays} {
		eventually(t, 5*time.Second, tn.id+" Status without the removed node", func() error {
			st, err := tn.cluster().Status(adminCtx(t), &pb.StatusRequest{})
			if err != nil {
				return err
			}
			if m := memberByID(st, victim.id); m != nil {
				return fmt.Errorf("Status still lists the removed node: %v", m)
			}
			if len(st.GetMembers()) != 2 {
				return fmt.Errorf("members %v", st.GetMembers())
			}
			return nil
		})
	}
	resp, hdr := createKey(t, stays, "after-removal")
	if leader.n.Store().State().KeyByHash(raftstore.HashSecret(resp.GetSecret())) == nil {
		t.Error("leader lacks a key written after the removal")
	}
	if v := hdr.Get(mdLagging); len(v) != 0 {
		t.Errorf("%s = %q", mdLagging, v)
	}
}

// Two of three voters crash at once: the remaining node (which has lost
// quorum) must not shrink the configuration, and still serves reads from
// its local state.
func TestNoRemovalWithoutQuorum(t *testing.T) {
	t.Parallel()
	const grace = 500 * time.Millisecond
	nodes := startCluster(t, 3, func(c *Config) { c.DeadNodeGrace = grace })
	leader, followers := split(t, nodes)
	resp, _ := createKey(t, followers[0], "before")

	followers[0].crash()
	followers[1].crash()
	// Watch for well over the grace period plus a reconcile tick.
	end := time.Now().Add(grace + 2*reconcileInterval + time.Second)
	for time.Now().Before(end) {
		srvs, err := leader.n.Store().Servers()
		if err != nil {
			t.Fatalf("Servers: %v", err)
		}
		if len(srvs) != 3 {
			t.Fatalf("configuration shrank to %v", srvs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if leader.n.Store().IsLeader() {
		t.Error("the node is still leader without a quorum")
	}
	list, err := leader.keys().ListKeys(adminCtx(t), &pb.ListKeysRequest{})
	if err != nil || len(list.GetKeys()) != 1 || list.GetKeys()[0].GetId() != resp.GetKey().GetId() {
		t.Errorf("local read without a quorum = %v, %v", list, err)
	}
	_, err = leader.keys().CreateKey(tokenCtx(t, testAdminToken, 3*time.Second), &pb.CreateKeyRequest{Name: "no-quorum"})
	if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
		t.Errorf("write without a quorum: %v, want Unavailable or DeadlineExceeded", err)
	}
}

// The majority guard itself, on a leader that keeps its quorum: gossip
// (here: the leader's member table, overridden) says both followers are
// dead; removing them would leave the leader a voter alone that is not a
// live majority of what remains, so nothing is removed. With one follower
// dead the guard lets the removal through.
func TestReconcileKeepsLiveMajority(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	nodes := startCluster(t, 3, func(c *Config) { c.DeadNodeGrace = grace })
	leader, followers := split(t, nodes)

	markDead := func(ids ...string) {
		g := leader.n.gossip
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, id := range ids {
			if m := g.members[id]; m != nil && m.state != "dead" {
				m.state, m.since = "dead", time.Now().Add(-time.Hour)
			}
		}
	}
	end := time.Now().Add(grace + 3*reconcileInterval)
	for time.Now().Before(end) {
		markDead(followers[0].id, followers[1].id)
		if !leader.n.Store().IsLeader() {
			t.Fatal("leader lost leadership; the check is moot")
		}
		srvs, err := leader.n.Store().Servers()
		if err != nil {
			t.Fatalf("Servers: %v", err)
		}
		if len(srvs) != 3 {
			t.Fatalf("leader removed nodes with no live majority left: %v", srvs)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// One "dead" follower: 2 of the 2 remaining voters are alive.
	g := leader.n.gossip
	g.mu.Lock()
	g.members[followers[1].id].state = "alive"
	g.mu.Unlock()
	eventually(t, 10*time.Second, "leader removes the one dead follower", func() error {
		markDead(followers[0].id)
		srvs, err := leader.n.Store().Servers()
		if err != nil {
			return err
		}
		for _, s := range srvs {
			if s.ID == followers[0].id {
				return fmt.Errorf("still in %v", srvs)
			}
		}
		if len(srvs) != 2 {
			return fmt.Errorf("servers %v", srvs)
		}
		return nil
	})
}

// A node started with Join naming one member becomes a voter, and its
// /readyz turns 200 only once it holds the cluster's state.
//
// BUG: raftstore Store.readyOnce (store.go) takes a follower as caught up
// when raft.AppliedIndex() >= CommitIndex(), but hashicorp/raft advances
// AppliedIndex when it hands entries to the FSM goroutine, not when the FSM
// has applied them. A joiner whose last batch holds a large entry (here a
// restore of 5000 keys) reports ready while its State still lacks it.
func TestJoinCatchesUpBeforeReady(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	_, followers := split(t, nodes)
	// A few keys through the API, then many at once through a restore:
	// one large log entry that takes the joiner a while to apply.
	var secrets []string
	for i := range 10 {
		resp, _ := createKey(t, nodes[i%3], "k"+strconv.Itoa(i))
		secrets = append(secrets, resp.GetSecret())
	}
	saved, err := followers[0].cluster().SaveSnapshot(adminCtx(t), &pb.SaveSnapshotRequest{})
	if err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	var snap pb.Snapshot
	if err := proto.Unmarshal(saved.GetData(), &snap); err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		secret := "tg-bulk-secret-" + strconv.Itoa(i)
		h := raftstore.HashSecret(secret)
		snap.Keys = append(snap.Keys, &pb.StoredKey{
			Key:        &pb.Key{Id: "bulk_" + strconv.Itoa(i), Name: "bulk " + strconv.Itoa(i), SecretPrefix: secret[:10], Models: []string{"m-" + strconv.Itoa(i%10), "gpt-*"}},
			SecretHash: h[:],
		})
		secrets = append(secrets, secret)
	}
	data, err := proto.Marshal(&snap)
	if err != nil {
		t.Fatal(err)
	}
	err = retryUnavailable(5*time.Second, func() error {
		_, err := followers[1].cluster().RestoreSnapshot(adminCtx(t), &pb.RestoreSnapshotRequest{Data: data})
		return err
	})
	if err != nil {
		t.Fatalf("RestoreSnapshot: %v", err)
	}
	err = retryUnavailable(5*time.Second, func() error {
		_, err := followers[0].creds().SetCredential(adminCtx(t), &pb.SetCredentialRequest{Name: "c", Value: "sk-joined"})
		return err
	})
	if err != nil {
		t.Fatalf("SetCredential: %v", err)
	}
	leader, _ := split(t, nodes)
	wantIndex := leader.n.Store().State().Index

	// Join through the leader: it hears of the new node at once. (Through
	// a follower it may hear only at the next push/pull, up to 15s with
	// the local gossip timings: memberlist sends a broadcast only twice in
	// a cluster this small, and may send it to the others.)
	cfg := baseConfig(t, "n4", testLogger(t))
	cfg.Join = []string{leader.gossipAddr()}
	joiner := newTNode(t, cfg)

	// Watch Ready (what /readyz answers) closely from before the start:
	// the state it has the moment it first turns true.
	firstReady := make(chan *raftstore.State, 1)
	go func() {
		deadline := time.Now().Add(20 * time.Second)
		for !joiner.n.Ready() {
			if time.Now().After(deadline) {
				close(firstReady)
				return
			}
			runtime.Gosched()
		}
		firstReady <- joiner.n.Store().State()
	}()
	joiner.start()

	check := func(how string, st *raftstore.State) {
		t.Helper()
		if st.Index < wantIndex {
			t.Errorf("%s: joiner ready at applied index %d, before the cluster's %d", how, st.Index, wantIndex)
		}
		missing := 0
		for _, s := range secrets {
			if st.KeyByHash(raftstore.HashSecret(s)) == nil {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("%s: joiner ready while it lacked %d of %d keys", how, missing, len(secrets))
		}
		if c := st.Credential("c"); c == nil {
			t.Errorf("%s: joiner ready before it had the credential", how)
		}
		if !st.HasAdminToken(raftstore.HashSecret(testAdminToken)) {
			t.Errorf("%s: joiner ready without the admin token", how)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, err := joiner.readyz()
		if err == nil && code == http.StatusOK {
			check("/readyz first 200", joiner.n.Store().State())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("joiner not ready after 20s (last: %d, %v)", code, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if st, ok := <-firstReady; ok {
		check("Ready() first true", st)
	}

	all := append(nodes, joiner)
	leader = waitCluster(t, all, 4, 0)
	checkStatusAll(t, all, leader.id, ids(all)...)
	// Writes through the new node reach everyone.
	resp, _ := createKey(t, joiner, "via-joiner")
	for _, tn := range all {
		if tn.n.Store().State().KeyByHash(raftstore.HashSecret(resp.GetSecret())) == nil {
			t.Errorf("%s lacks the key written through the joiner", tn.id)
		}
	}
}

// Six nodes: five voters and one non-voter. When a voter dies and is removed
// the non-voter is promoted.
func TestFiveVotersMax(t *testing.T) {
	t.Parallel()
	// Six nodes in one process under -race on two cores: slow, and once in
	// CI the sixth node's gossip metadata update (no longer fresh) did not
	// reach the leader within 20 s. Opt-in until that is understood.
	if testing.Short() || os.Getenv("TOLLGATE_LONG") == "" {
		t.Skip("six nodes: set TOLLGATE_LONG=1 to run")
	}
	const grace = 500 * time.Millisecond
	nodes := startCluster(t, 3, func(c *Config) { c.DeadNodeGrace = grace })
	leader, _ := split(t, nodes)
	resp, _ := createKey(t, leader, "early")

	logger := testLogger(t)
	var joiners []*tnode
	for i := 4; i <= 6; i++ {
		cfg := baseConfig(t, "n"+strconv.Itoa(i), logger)
		cfg.DeadNodeGrace = grace
		cfg.Join = []string{nodes[0].gossipAddr(), nodes[1].gossipAddr(), nodes[2].gossipAddr()}
		joiners = append(joiners, startNode(t, cfg))
	}
	all := append(append([]*tnode(nil), nodes...), joiners...)
	began := time.Now()
	leader = waitCluster(t, all, 5, 1)
	t.Logf("six nodes: 5 voters and a non-voter after %v", time.Since(began).Round(time.Millisecond))
	nonvoter := checkNonVoter(t, leader, all, resp.GetSecret())

	// A voting follower dies: after the grace it is removed and the
	// non-voter promoted.
	victim := votingFollower(leader, nonvoter, all)
	victim.crash()
	began = time.Now()
	waitCluster(t, without(all, victim), 5, 0)
	t.Logf("dead voter replaced by the non-voter after %v", time.Since(began).Round(time.Millisecond))
}

// Cancelling a leader's Run drains it: /readyz answers 503 during the drain
// delay while another node takes over leadership, then Run returns.
func TestGracefulLeaderShutdown(t *testing.T) {
	t.Parallel()
	const delay = 500 * time.Millisecond
	nodes := startCluster(t, 3, func(c *Config) { c.DrainDelay = delay })
	old, others := split(t, nodes)

	old.cancel()
	cancelled := time.Now()
	saw503 := false
	for time.Since(cancelled) < delay {
		code, err := old.readyz()
		if err != nil {
			t.Fatalf("/readyz failed during the drain delay (%v after cancel): %v", time.Since(cancelled), err)
		}
		if code == http.StatusServiceUnavailable {
			saw503 = true
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !saw503 {
		t.Error("/readyz did not answer 503 during the drain delay")
	}
	if old.n.Ready() {
		t.Error("Ready() is true while draining")
	}

	var nl *tnode
	eventually(t, 3*time.Second, "leadership handed over", func() error {
		l, err := agreedLeader(others)
		nl = l
		return err
	})
	handover := time.Since(cancelled)
	t.Logf("new leader %s %v after cancel", nl.id, handover.Round(time.Millisecond))

	select {
	case <-old.done:
	case <-time.After(delay + 10*time.Second):
		t.Fatal("Run did not return")
	}
	if elapsed := time.Since(cancelled); elapsed < delay {
		t.Errorf("Run returned %v after cancel, before the drain delay of %v", elapsed, delay)
	}
	if p := old.runPanic(); p != nil {
		t.Fatalf("Run panicked: %v", p)
	}
	if old.runErr != nil {
		t.Errorf("Run returned %v", old.runErr)
	}
	if _, err := old.readyz(); err == nil {
		t.Error("/readyz still answers after Run returned")
	}
	// The drained node left gossip; the others still take writes.
	eventually(t, 10*time.Second, "others see the node gone", func() error {
		st, err := nl.cluster().Status(adminCtx(t), &pb.StatusRequest{})
		if err != nil {
			return err
		}
		if m := memberByID(st, old.id); m == nil || m.GetHealth() == "healthy" || m.GetGossipState() == "alive" {
			return fmt.Errorf("member %v", m)
		}
		return nil
	})
	err := retryUnavailable(5*time.Second, func() error {
		_, err := others[0].keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: "after-drain"})
		return err
	})
	if err != nil {
		t.Errorf("write after the leader drained: %v", err)
	}
}

// With BootstrapExpect and no configured admin token, every node generates
// and prints a token of its own. Each printed token should work for writes
// through its node as soon as the node is ready: a follower registers its
// token in the replicated state before it turns ready, since the leader it
// forwards writes to knows only the replicated tokens.
func TestBootstrapExpectGeneratedTokens(t *testing.T) {
	t.Parallel()
	testGeneratedTokens(t, false)
}

// A follower whose token has not reached the replicated state yet
// registers it before forwarding a write that carries it.
func TestGeneratedTokenRegisteredOnForward(t *testing.T) {
	t.Parallel()
	testGeneratedTokens(t, true)
}

func testGeneratedTokens(t *testing.T, lazy bool) {
	banners := make([]*syncBuffer, 3)
	var mu sync.Mutex
	i := 0
	nodes := startCluster(t, 3, func(c *Config) {
		mu.Lock()
		defer mu.Unlock()
		c.AdminToken = ""
		c.lazyTokenRegistration = lazy
		banners[i] = &syncBuffer{}
		c.TokenOut = banners[i]
		i++
	})
	for _, tn := range nodes {
		tok := tn.n.adminToken
		if tok == "" {
			t.Fatalf("%s has no generated token", tn.id)
		}
		if !strings.Contains(banners[slices.Index(nodes, tn)].String(), tok) {
			t.Errorf("%s did not print its token", tn.id)
		}
		h := raftstore.HashSecret(tok)
		if registered := tn.n.Store().State().HasAdminToken(h); registered == (lazy && !tn.n.Store().IsLeader()) {
			t.Errorf("%s (leader %v, lazy %v): token registered = %v before its first write", tn.id, tn.n.Store().IsLeader(), lazy, registered)
		}
		// Unavailable (a leadership change under load) is retried, as
		// tollctl does; Unauthenticated is the failure looked for.
		err := retryUnavailable(10*time.Second, func() error {
			_, err := tn.keys().CreateKey(tokenCtx(t, tok, 10*time.Second), &pb.CreateKeyRequest{Name: "own-token-" + tn.id})
			return err
		})
		if err != nil {
			role := "follower"
			if tn.n.Store().IsLeader() {
				role = "leader"
			}
			t.Errorf("CreateKey through %s (%s) with the token it printed: %v", tn.id, role, err)
		}
	}
}
