package raftstore

import (
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// baseNanos is the command time of the first command a harness applies; each
// further command is one second later unless it carries its own time.
const baseNanos = int64(1_700_000_000_000_000_000)

func hashOf(secret string) []byte {
	h := HashSecret(secret)
	return h[:]
}

// --- command builders -------------------------------------------------------

func createKeyCmd(id, secret string, models ...string) *pb.Command {
	return &pb.Command{Op: &pb.Command_CreateKey{CreateKey: &pb.CreateKeyCommand{Key: &pb.StoredKey{
		Key:        &pb.Key{Id: id, Name: "name-" + id, SecretPrefix: secret[:min(4, len(secret))], Models: models},
		SecretHash: hashOf(secret),
	}}}}
}

func updateKeyCmd(u *pb.UpdateKeyRequest) *pb.Command {
	return &pb.Command{Op: &pb.Command_UpdateKey{UpdateKey: &pb.UpdateKeyCommand{Update: u}}}
}

func revokeKeyCmd(id string) *pb.Command {
	return &pb.Command{Op: &pb.Command_RevokeKey{RevokeKey: &pb.RevokeKeyCommand{Id: id}}}
}

func rotateKeyCmd(id, secret string) *pb.Command {
	return &pb.Command{Op: &pb.Command_RotateKey{RotateKey: &pb.RotateKeyCommand{
		Id: id, SecretHash: hashOf(secret), SecretPrefix: secret[:min(4, len(secret))],
	}}}
}

func addDeploymentCmd(route string, d *pb.Deployment) *pb.Command {
	return &pb.Command{Op: &pb.Command_AddDeployment{AddDeployment: &pb.AddDeploymentCommand{Route: route, Deployment: d}}}
}

func updateDeploymentCmd(u *pb.UpdateDeploymentRequest) *pb.Command {
	return &pb.Command{Op: &pb.Command_UpdateDeployment{UpdateDeployment: &pb.UpdateDeploymentCommand{Update: u}}}
}

func removeDeploymentCmd(route, id string) *pb.Command {
	return &pb.Command{Op: &pb.Command_RemoveDeployment{RemoveDeployment: &pb.RemoveDeploymentCommand{Route: route, DeploymentId: id}}}
}

func deleteRouteCmd(route string) *pb.Command {
	return &pb.Command{Op: &pb.Command_DeleteRoute{DeleteRoute: &pb.DeleteRouteCommand{Route: route}}}
}

func setCredentialCmd(name, value string) *pb.Command {
	return &pb.Command{Op: &pb.Command_SetCredential{SetCredential: &pb.SetCredentialCommand{Name: name, Value: value}}}
}

func deleteCredentialCmd(name string) *pb.Command {
	return &pb.Command{Op: &pb.Command_DeleteCredential{DeleteCredential: &pb.DeleteCredentialCommand{Name: name}}}
}

func addAdminTokenCmd(hash []byte) *pb.Command {
	return &pb.Command{Op: &pb.Command_AddAdminToken{AddAdminToken: &pb.AddAdminTokenCommand{TokenHash: hash}}}
}

func dep(id, provider, cred string) *pb.Deployment {
	return &pb.Deployment{
		Id: id, Provider: provider, BaseUrl: "https://" + id + ".example/v1/",
		UpstreamModel: "up-" + id, Credential: cred, Weight: 2, Priority: 1, TimeoutMs: 3000,
	}
}

func at(cmd *pb.Command, nanos int64) *pb.Command {
	cmd.UnixNanos = nanos
	return cmd
}

// --- FSM harness --------------------------------------------------------------

// harness drives a bare fsm through (*fsm).Apply with hand-built raft.Logs.
type harness struct {
	t   testing.TB
	f   *fsm
	idx uint64
	now int64
}

func newHarness(t testing.TB) *harness {
	return &harness{t: t, f: newFSM(), now: baseNanos - 1e9}
}

func (h *harness) state() *State { return h.f.state.Load() }

// apply stamps cmd (when it has no time), encodes it into the next log entry
// and applies it.
func (h *harness) apply(cmd *pb.Command) (proto.Message, error) {
	h.t.Helper()
	if cmd.UnixNanos == 0 {
		h.now += 1e9
		cmd.UnixNanos = h.now
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		h.t.Fatalf("marshal command: %v", err)
	}
	h.idx++
	res, ok := h.f.Apply(&raft.Log{Index: h.idx, Term: 1, Type: raft.LogCommand, Data: data}).(*applyResult)
	if !ok || res == nil {
		h.t.Fatalf("Apply returned %T, want *applyResult", res)
	}
	return res.value, res.err
}

func (h *harness) must(cmds ...*pb.Command) proto.Message {
	h.t.Helper()
	var v proto.Message
	for _, c := range cmds {
		var err error
		if v, err = h.apply(c); err != nil {
			h.t.Fatalf("apply %v: %v", c, err)
		}
	}
	return v
}

// fixture is the state most FSM tests start from:
//   - key k1 (secret s1, models gpt-4o and claude-*, metadata team/env)
//   - key k2 (secret s2, allow all), revoked
//   - credential openai
//   - route gpt-4o with deployments d1 (credential openai) and d2 (none)
//   - route solo with the single deployment only (credential openai)
//   - one admin token
func fixture() []*pb.Command {
	k1 := createKeyCmd("k1", "s1", "gpt-4o", "claude-*")
	k1.GetCreateKey().Key.Key.Metadata = map[string]string{"team": "a", "env": "prod"}
	return []*pb.Command{
		k1,
		createKeyCmd("k2", "s2"),
		revokeKeyCmd("k2"),
		setCredentialCmd("openai", "sk-openai"),
		addDeploymentCmd("gpt-4o", dep("d1", "openai", "openai")),
		addDeploymentCmd("gpt-4o", dep("d2", "demo", "")),
		addDeploymentCmd("solo", dep("only", "openai", "openai")),
		addAdminTokenCmd(hashOf("admin")),
	}
}

func newFixture(t testing.TB) *harness {
	h := newHarness(t)
	h.must(fixture()...)
	return h
}

// --- state comparison ---------------------------------------------------------

// snapBytes is the deterministic encoding of the whole state.
func snapBytes(t testing.TB, st *State) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(snapshotOf(st))
	if err != nil {
		t.Fatalf("marshal snapshot: %v", err)
	}
	return b
}

// contentBytes is snapBytes without the index.
func contentBytes(t testing.TB, st *State) []byte {
	t.Helper()
	snap := snapshotOf(st)
	snap.Index = 0
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		t.Fatalf("marshal snapshot: %v", err)
	}
	return b
}

// views is a deep copy of every derived view of a state, for comparing a
// state before and after later applies.
type views struct {
	keys       map[string]Key // by hash
	routes     map[string]Route
	routeNames []string
	admin      int
}

// copyKeyView copies what k points to as well (its lists, budget and
// limits), so that a change to any of them in place shows.
func copyKeyView(k *Key) Key {
	c := *k
	c.lists = slices.Clone(k.lists)
	if k.Budget != nil {
		b := *k.Budget
		c.Budget = &b
	}
	if k.Limits != nil {
		l := *k.Limits
		c.Limits = &l
	}
	return c
}

func copyRouteView(r *Route) Route {
	c := *r
	c.Deployments = nil
	for _, d := range r.Deployments {
		dc := *d
		c.Deployments = append(c.Deployments, &dc)
	}
	return c
}

func viewsOf(st *State) views {
	v := views{keys: map[string]Key{}, routes: map[string]Route{}, admin: len(st.adminTokens)}
	if len(st.routeNames) > 0 { // nil and empty are the same listing
		v.routeNames = slices.Clone(st.routeNames)
	}
	st.keysByHash.ascend(func(k *Key) bool {
		v.keys[k.hash] = copyKeyView(k)
		return true
	})
	for n, r := range st.routes {
		v.routes[n] = copyRouteView(r)
	}
	return v
}

// frozen records a state's contents so that checkUnchanged can verify that
// nothing reachable from it was modified.
type frozen struct {
	st      *State
	content *pb.Snapshot
	index   uint64
	views   views
}

func freeze(st *State) frozen {
	return frozen{st: st, content: proto.Clone(snapshotOf(st)).(*pb.Snapshot), index: st.Index, views: viewsOf(st)}
}

func (f frozen) checkUnchanged(t testing.TB) {
	t.Helper()
	if f.st.Index != f.index {
		t.Errorf("old state's Index changed from %d to %d", f.index, f.st.Index)
	}
	if got := snapshotOf(f.st); !proto.Equal(got, f.content) {
		t.Errorf("old state's contents changed:\n got %v\nwant %v", got, f.content)
	}
	if got := viewsOf(f.st); !reflect.DeepEqual(got, f.views) {
		t.Errorf("old state's views changed:\n got %+v\nwant %+v", got, f.views)
	}
}

func ts(nanos int64) *timestamppb.Timestamp { return timestamppb.New(timeOf(nanos)) }
