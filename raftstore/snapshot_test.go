package raftstore

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
	failWrite         bool
}

func (s *memSink) ID() string { return "mem" }

func (s *memSink) Write(p []byte) (int, error) {
	if s.failWrite {
		return 0, errors.New("disk full")
	}
	return s.Buffer.Write(p)
}

func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

// restored is the state a new FSM restores from a persisted snapshot.
func restored(t testing.TB, data []byte) *State {
	t.Helper()
	f := newFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return f.state.Load()
}

func persist(t testing.TB, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v, want closed only", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

// rich builds a state using every command, including keys with expiry,
// metadata, revocation and rotation, and routes with missing credentials.
func rich(t testing.TB) *harness {
	h := newFixture(t)
	exp := createKeyCmd("k3", "s3", "*-mini", "a*b*c")
	exp.GetCreateKey().Key.Key.ExpiresAt = ts(baseNanos + 1e12)
	h.must(
		exp,
		rotateKeyCmd("k1", "s1-rotated"),
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Metadata: map[string]string{"x": "1"}}),
		addDeploymentCmd("o1", dep("m1", "openai", "missing-cred")),
		addDeploymentCmd("o1", dep("m2", "demo", "")),
		updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "d2", Priority: proto.Uint32(7)}),
		setCredentialCmd("anthropic", "sk-ant"),
		addAdminTokenCmd(hashOf("admin2")),
	)
	return h
}

func compareStates(t *testing.T, got, want *State) {
	t.Helper()
	if got.Index != want.Index {
		t.Errorf("Index = %d, want %d", got.Index, want.Index)
	}
	if !proto.Equal(snapshotOf(got), snapshotOf(want)) {
		t.Errorf("contents differ:\n got %v\nwant %v", snapshotOf(got), snapshotOf(want))
	}
	for _, sk := range want.Keys() {
		id := sk.GetKey().GetId()
		if !proto.Equal(got.Key(id), sk) {
			t.Errorf("Key(%q) = %v, want %v", id, got.Key(id), sk)
		}
	}
	if got.KeyCount() != want.KeyCount() {
		t.Errorf("%d keys, want %d", got.KeyCount(), want.KeyCount())
	}
	if !reflect.DeepEqual(viewsOf(got), viewsOf(want)) {
		t.Errorf("views differ:\n got %+v\nwant %+v", viewsOf(got), viewsOf(want))
	}
	for h := range want.adminTokens {
		if !got.HasAdminToken(h) {
			t.Errorf("admin token %x missing", h)
		}
	}
	for name, c := range want.creds {
		if !proto.Equal(got.Credential(name), c) {
			t.Errorf("Credential(%q) = %v, want %v", name, got.Credential(name), c)
		}
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	h := rich(t)
	want := h.state()
	data := persist(t, h.f)

	f := newFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	got := f.state.Load()
	compareStates(t, got, want)

	// Spot checks of the derived views through the public lookups.
	if k := got.KeyByHash(HashSecret("s1-rotated")); k == nil || k.ID != "k1" {
		t.Errorf("rotated secret resolves to %+v", k)
	}
	if got.KeyByHash(HashSecret("s1")) != nil {
		t.Error("pre-rotation secret resolves after restore")
	}
	if k := got.KeyByHash(HashSecret("s2")); k == nil || !k.Revoked {
		t.Errorf("revoked key = %+v", k)
	}
	if k := got.KeyByHash(HashSecret("s3")); k == nil || k.ExpiresAt != baseNanos+1e12 || !k.Allows("o1-mini") || !k.Allows("aXbc") || k.Allows("gpt-4o") {
		t.Errorf("k3 view = %+v", k)
	}
	if d := got.Route("gpt-4o").Deployments[0]; d.Credential != "sk-openai" {
		t.Errorf("gpt-4o/d1 = %+v", d)
	}
	if d := got.Route("o1").Deployments[0]; !d.CredentialMissing {
		t.Errorf("o1/m1 = %+v, want CredentialMissing", d)
	}
	if got.AdminTokenCount() != 2 {
		t.Errorf("AdminTokenCount = %d", got.AdminTokenCount())
	}

	// The restored FSM persists the same bytes and applies further commands
	// exactly like the original.
	if again := persist(t, f); !bytes.Equal(again, data) {
		t.Error("restored state persists differently")
	}
	next := []*pb.Command{
		at(createKeyCmd("k4", "s4"), baseNanos+500e9),
		at(deleteCredentialCmd("anthropic"), baseNanos+501e9),
		at(removeDeploymentCmd("o1", "m1"), baseNanos+502e9),
	}
	h2 := &harness{t: t, f: f, idx: got.Index, now: h.now}
	for _, c := range next {
		h.must(proto.Clone(c).(*pb.Command))
		h2.must(proto.Clone(c).(*pb.Command))
	}
	if !bytes.Equal(snapBytes(t, h.state()), snapBytes(t, h2.state())) {
		t.Error("original and restored FSMs diverge after further commands")
	}
}

func TestSnapshotOfEmptyState(t *testing.T) {
	data := persist(t, newFSM())
	f := newHarness(t).f
	h := newFixture(t)
	if err := h.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	compareStates(t, h.state(), f.state.Load())
}

// A snapshot is taken of the state at the time Snapshot is called, even if
// the FSM applies more before Persist runs (Raft persists concurrently).
func TestSnapshotIsPointInTime(t *testing.T) {
	h := rich(t)
	want := snapBytes(t, h.state())
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.must(createKeyCmd("late", "late"), deleteRouteCmd("gpt-4o"))
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapBytes(t, restored(t, sink.Bytes())), want) {
		t.Error("snapshot includes commands applied after Snapshot()")
	}
}

func TestPersistWriteErrorCancels(t *testing.T) {
	h := rich(t)
	snap, _ := h.f.Snapshot()
	sink := &memSink{failWrite: true}
	if err := snap.Persist(sink); err == nil {
		t.Fatal("Persist succeeded on a failing sink")
	}
	if !sink.cancelled || sink.closed {
		t.Errorf("sink cancelled=%v closed=%v, want cancelled only", sink.cancelled, sink.closed)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("read failed") }

func TestRestoreCorruptKeepsState(t *testing.T) {
	good := persist(t, rich(t).f)
	badHash := &pb.Snapshot{Index: 3, Keys: []*pb.StoredKey{{Key: &pb.Key{Id: "x"}, SecretHash: []byte("short")}}}
	badHashData, _ := proto.Marshal(badHash)
	badToken := &pb.Snapshot{Index: 3, AdminTokenHashes: [][]byte{{1, 2, 3}}}
	badTokenData, _ := proto.Marshal(badToken)

	cases := map[string]io.Reader{
		"garbage":        bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}),
		"truncated":      bytes.NewReader(good[:len(good)/2]),
		"bad key hash":   bytes.NewReader(badHashData),
		"bad token hash": bytes.NewReader(badTokenData),
		"read error":     errReader{},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			h := newFixture(t)
			before := h.state()
			want := snapBytes(t, before)
			ch := h.f.changedCh()
			if err := h.f.Restore(io.NopCloser(r)); err == nil {
				t.Fatal("Restore succeeded")
			}
			if h.state() != before || !bytes.Equal(snapBytes(t, h.state()), want) {
				t.Error("failed Restore replaced the state")
			}
			select {
			case <-ch:
				t.Error("failed Restore signalled a change")
			default:
			}
		})
	}
}

type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

func TestRestoreClosesReader(t *testing.T) {
	for _, data := range [][]byte{persist(t, rich(t).f), {0xff}} {
		rc := &closeTracker{Reader: bytes.NewReader(data)}
		_ = newFSM().Restore(rc)
		if !rc.closed {
			t.Error("Restore did not close the reader")
		}
	}
}
