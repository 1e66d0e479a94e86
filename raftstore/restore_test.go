package raftstore

import (
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Tests of the Restore command (what ClusterService.RestoreSnapshot
// proposes), applied through the FSM.

func restoreCmd(snap *pb.Snapshot) *pb.Command {
	return &pb.Command{Op: &pb.Command_Restore{Restore: &pb.RestoreCommand{Snapshot: snap}}}
}

// ownState applies things of the destination's own that a restore replaces,
// and an admin token of its own that it keeps.
func ownState(h *harness) {
	h.must(
		createKeyCmd("own", "own-secret"),
		setCredentialCmd("own-cred", "sk-own"),
		addDeploymentCmd("own-route", dep("x", "demo", "")),
		addDeploymentCmd("gpt-4o", dep("own-dep", "demo", "")), // a route name the snapshot has too
		addAdminTokenCmd(hashOf("dst-admin")),
	)
}

func TestRestoreCommandReplacesState(t *testing.T) {
	src := rich(t)
	want := src.state()
	snap := proto.Clone(snapshotOf(want)).(*pb.Snapshot)

	dst := newHarness(t)
	ownState(dst)
	old := freeze(dst.state())

	res, err := dst.apply(restoreCmd(snap))
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if res != nil {
		t.Errorf("restore result = %v, want none", res)
	}
	got := dst.state()
	old.checkUnchanged(t)
	if got.Index != dst.idx {
		t.Errorf("Index = %d, want the restore's log index %d (not the snapshot's %d)", got.Index, dst.idx, snap.GetIndex())
	}

	// Keys, routes and credentials are the snapshot's, and nothing else.
	if g, w := got.Keys(), want.Keys(); !protoSliceEqual(g, w) {
		t.Errorf("keys = %v, want %v", g, w)
	}
	if g, w := got.RouteConfigs(), want.RouteConfigs(); !protoSliceEqual(g, w) {
		t.Errorf("routes = %v, want %v", g, w)
	}
	if g, w := got.Credentials(), want.Credentials(); !protoSliceEqual(g, w) {
		t.Errorf("credentials = %v, want %v", g, w)
	}
	if got.Key("own") != nil || got.KeyByHash(HashSecret("own-secret")) != nil {
		t.Error("the destination's own key survived the restore")
	}
	if got.Credential("own-cred") != nil || got.Route("own-route") != nil {
		t.Error("the destination's own credential or route survived the restore")
	}
	for _, d := range got.Route("gpt-4o").Deployments {
		if d.ID == "own-dep" {
			t.Error("a route the snapshot also has kept the destination's deployment")
		}
	}

	// The derived views are the source's: the same lookups answer the same.
	gv, wv := viewsOf(got), viewsOf(want)
	if !reflect.DeepEqual(gv.keys, wv.keys) {
		t.Errorf("key views differ:\n got %+v\nwant %+v", gv.keys, wv.keys)
	}
	if !reflect.DeepEqual(gv.routes, wv.routes) || !reflect.DeepEqual(gv.routeNames, wv.routeNames) {
		t.Errorf("route views differ:\n got %+v %v\nwant %+v %v", gv.routes, gv.routeNames, wv.routes, wv.routeNames)
	}
	if k := got.KeyByHash(HashSecret("s1-rotated")); k == nil || k.ID != "k1" || !k.Allows("gpt-4o") || k.Allows("o1") {
		t.Errorf("KeyByHash(k1's secret) = %+v", k)
	}
	if got.KeyByHash(HashSecret("s1")) != nil {
		t.Error("k1's pre-rotation secret resolves after the restore")
	}
	if k := got.KeyByHash(HashSecret("s2")); k == nil || !k.Revoked {
		t.Errorf("KeyByHash(k2's secret) = %+v, want revoked", k)
	}
	if r := got.Route("gpt-4o"); r == nil || len(r.Deployments) != 2 || r.Deployments[0].Credential != "sk-openai" {
		t.Errorf("Route(gpt-4o) = %+v", r)
	}
	if r := got.Route("o1"); r == nil || !r.Deployments[0].CredentialMissing {
		t.Errorf("Route(o1) = %+v, want its missing credential flagged", r)
	}

	// Admin tokens are merged: the snapshot's and the destination's.
	for _, tok := range []string{"admin", "admin2", "dst-admin"} {
		if !got.HasAdminToken(HashSecret(tok)) {
			t.Errorf("admin token %q missing after restore", tok)
		}
	}
	if n := got.AdminTokenCount(); n != 3 {
		t.Errorf("AdminTokenCount = %d, want 3", n)
	}

	// The restored state is a normal state: commands apply to it.
	if _, err := dst.apply(createKeyCmd("k9", "s1-rotated")); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("create with a restored key's secret: %v, want ErrAlreadyExists", err)
	}
	dst.must(revokeKeyCmd("k1"), deleteRouteCmd("solo"))
	if k := dst.state().KeyByHash(HashSecret("s1-rotated")); k == nil || !k.Revoked {
		t.Errorf("revoke after restore: %+v", k)
	}
	if dst.state().Route("solo") != nil {
		t.Error("delete route after restore left it")
	}
	// And the restore did not alias the source's state.
	if k := want.KeyByHash(HashSecret("s1-rotated")); k == nil || k.Revoked {
		t.Error("a command after the restore changed the source state")
	}
}

// Restoring the same snapshot on two replicas gives the same state, and
// restoring an empty snapshot clears everything but the admin tokens.
func TestRestoreCommandDeterministicAndEmpty(t *testing.T) {
	snap := snapshotOf(rich(t).state())
	a, b := newHarness(t), newHarness(t)
	ownState(a)
	ownState(b)
	a.must(restoreCmd(proto.Clone(snap).(*pb.Snapshot)))
	b.must(restoreCmd(proto.Clone(snap).(*pb.Snapshot)))
	if string(snapBytes(t, a.state())) != string(snapBytes(t, b.state())) {
		t.Error("two replicas restoring the same snapshot differ")
	}

	a.must(restoreCmd(&pb.Snapshot{}))
	st := a.state()
	if len(st.Keys()) != 0 || len(st.RouteNames()) != 0 || len(st.Credentials()) != 0 {
		t.Errorf("empty restore left keys %v routes %v credentials %v", st.Keys(), st.RouteNames(), st.Credentials())
	}
	if st.KeyByHash(HashSecret("s2")) != nil {
		t.Error("empty restore left a key view")
	}
	if n := st.AdminTokenCount(); n != 3 {
		t.Errorf("empty restore: %d admin tokens, want the 3 registered", n)
	}
}

// A snapshot that does not decode into a valid state is refused with
// ErrInvalid and leaves the state as it was.
func TestRestoreCommandBadSnapshot(t *testing.T) {
	good := snapshotOf(rich(t).state())
	cases := map[string]*pb.Snapshot{
		"no snapshot": nil,
		"key hash too short": func() *pb.Snapshot {
			s := proto.Clone(good).(*pb.Snapshot)
			s.Keys[0].SecretHash = s.Keys[0].SecretHash[:31]
			return s
		}(),
		"key hash missing": {Keys: []*pb.StoredKey{{Key: &pb.Key{Id: "k"}}}},
		"admin token hash too long": func() *pb.Snapshot {
			s := proto.Clone(good).(*pb.Snapshot)
			s.AdminTokenHashes = append(s.AdminTokenHashes, make([]byte, 33))
			return s
		}(),
	}
	for name, snap := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			ownState(h)
			before := h.state()
			fr := freeze(before)
			content := contentBytes(t, before)
			views := viewsOf(before)

			_, err := h.apply(restoreCmd(snap))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("restore: %v, want ErrInvalid", err)
			}
			after := h.state()
			fr.checkUnchanged(t)
			if string(contentBytes(t, after)) != string(content) {
				t.Errorf("a refused restore changed the state:\n got %v\nwant %v", snapshotOf(after), snapshotOf(before))
			}
			if !reflect.DeepEqual(viewsOf(after), views) {
				t.Error("a refused restore changed the derived views")
			}
			if k := after.KeyByHash(HashSecret("own-secret")); k == nil || k.ID != "own" {
				t.Errorf("own key after a refused restore: %+v", k)
			}
			if after.Index != h.idx {
				t.Errorf("Index = %d, want %d (a failed command still advances the index)", after.Index, h.idx)
			}
		})
	}
}

func protoSliceEqual[M proto.Message](a, b []M) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// A Restore command is a log entry: a node that replays it must end where
// the nodes that applied it did. Releases before putNew applied a backup
// that holds a key id twice (two backups concatenated parse as their
// merge) with the later copy replacing the earlier; so must this one, or an
// upgraded node replaying such an entry would keep its old state while the
// others restored.
func TestRestoreCommandWithAKeyTwiceKeepsTheLaterCopyAsBefore(t *testing.T) {
	snap := proto.Clone(snapshotOf(rich(t).state())).(*pb.Snapshot)
	first := snap.GetKeys()[0]
	later := proto.Clone(first).(*pb.StoredKey)
	later.Key.Name, later.SecretHash = "renamed", hashOf("a-new-secret")
	snap.Keys = append(snap.Keys, later)

	dst := newHarness(t)
	if _, err := dst.apply(restoreCmd(snap)); err != nil {
		t.Fatalf("restore of a backup holding key %q twice: %v", first.GetKey().GetId(), err)
	}
	st := dst.state()
	if got := st.Key(first.GetKey().GetId()); got.GetKey().GetName() != "renamed" {
		t.Errorf("key %q after restore: %v, want the later copy", first.GetKey().GetId(), got)
	}
	if n := st.KeyCount(); n != len(snap.GetKeys())-1 || len(st.Keys()) != n {
		t.Errorf("%d keys (%d by creation), want %d", n, len(st.Keys()), len(snap.GetKeys())-1)
	}
	oldHash, _ := hash32(first.GetSecretHash())
	newHash, _ := hash32(later.GetSecretHash())
	if st.KeyByHash(oldHash) != nil || st.KeyByHash(newHash).ID != first.GetKey().GetId() {
		t.Errorf("data plane: old secret %v, new secret %v; want only the new one", st.KeyByHash(oldHash), st.KeyByHash(newHash))
	}
}
