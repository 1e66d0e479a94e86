package raftstore

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func testConfig(dir string) Config {
	return Config{
		Dir:                dir,
		NodeID:             "n1",
		BindAddr:           "127.0.0.1:0",
		Bootstrap:          true,
		LogLevel:           "error",
		HeartbeatTimeout:   50 * time.Millisecond,
		ElectionTimeout:    50 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		// Small segments (16 KB): tests rotate them and do not preallocate 64 MB
		// per store.
		WALSegmentBytes: 16 << 10,
		// TOLLGATE_TEST_RAFT_LOG_STORE=wal runs the whole suite on the WAL
		// (empty: the default store, bolt).
		LogStore: os.Getenv("TOLLGATE_TEST_RAFT_LOG_STORE"),
	}
}

func openStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// openReady opens a store and waits until it is ready. The store is closed
// at the end of the test unless the test closes it first.
func openReady(t *testing.T, cfg Config) *Store {
	t.Helper()
	s := openStore(t, cfg)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = s.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	return s
}

func closeStore(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustApply(t *testing.T, s *Store, cmds ...*pb.Command) proto.Message {
	t.Helper()
	var v proto.Message
	for _, c := range cmds {
		var err error
		if v, err = s.Apply(ctxT(t), c); err != nil {
			t.Fatalf("Apply %v: %v", c, err)
		}
	}
	return v
}

// populate applies a mix of every command through the store.
func populate(t *testing.T, s *Store, prefix string) {
	t.Helper()
	k := createKeyCmd(prefix+"k1", prefix+"s1", "gpt-*")
	k.GetCreateKey().Key.Key.Metadata = map[string]string{"team": prefix}
	mustApply(t, s,
		k,
		createKeyCmd(prefix+"k2", prefix+"s2"),
		createKeyCmd(prefix+"k3", prefix+"s3", "o1"),
		updateKeyCmd(&pb.UpdateKeyRequest{Id: prefix + "k1", Name: proto.String("renamed"), ExpiresAt: ts(baseNanos)}),
		revokeKeyCmd(prefix+"k2"),
		rotateKeyCmd(prefix+"k3", prefix+"s3-new"),
		setCredentialCmd(prefix+"cred", "sk-"+prefix),
		setCredentialCmd(prefix+"spare", "x"),
		deleteCredentialCmd(prefix+"spare"),
		addDeploymentCmd(prefix+"route", dep("d1", "openai", prefix+"cred")),
		addDeploymentCmd(prefix+"route", dep("d2", "demo", "")),
		addDeploymentCmd(prefix+"gone", dep("g", "demo", "")),
		updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: prefix + "route", DeploymentId: "d2", Weight: proto.Uint32(4)}),
		removeDeploymentCmd(prefix+"route", "d1"),
		deleteRouteCmd(prefix+"gone"),
		addAdminTokenCmd(hashOf(prefix+"admin")),
	)
}

func checkPopulated(t *testing.T, st *State, prefix string) {
	t.Helper()
	if k := st.KeyByHash(HashSecret(prefix + "s1")); k == nil || k.Name != "renamed" || k.ExpiresAt != baseNanos || !k.Allows("gpt-4o") {
		t.Errorf("%sk1 view = %+v", prefix, k)
	}
	if k := st.KeyByHash(HashSecret(prefix + "s2")); k == nil || !k.Revoked {
		t.Errorf("%sk2 view = %+v", prefix, k)
	}
	if st.KeyByHash(HashSecret(prefix+"s3")) != nil {
		t.Errorf("%sk3's old secret resolves", prefix)
	}
	if k := st.KeyByHash(HashSecret(prefix + "s3-new")); k == nil || k.ID != prefix+"k3" {
		t.Errorf("%sk3 view = %+v", prefix, k)
	}
	if r := st.Route(prefix + "route"); r == nil || len(r.Deployments) != 1 || r.Deployments[0].ID != "d2" || r.Deployments[0].Weight != 4 {
		t.Errorf("%sroute = %+v", prefix, r)
	}
	if st.Route(prefix+"gone") != nil || st.Credential(prefix+"spare") != nil {
		t.Errorf("%s: deleted things are back", prefix)
	}
	if c := st.Credential(prefix + "cred"); c == nil || c.Value != "sk-"+prefix {
		t.Errorf("%scred = %v", prefix, c)
	}
	if !st.HasAdminToken(HashSecret(prefix + "admin")) {
		t.Errorf("%sadmin token missing", prefix)
	}
}

func TestStoreApply(t *testing.T) {
	t.Parallel()
	s := openReady(t, testConfig(t.TempDir()))

	if !s.Fresh() {
		t.Error("Fresh() = false on a new directory")
	}
	if !s.IsLeader() {
		t.Error("bootstrapped single node is not the leader")
	}
	if s.NodeID() != "n1" {
		t.Errorf("NodeID = %q", s.NodeID())
	}
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Errorf("Addr() = %q, want 127.0.0.1 and the bound port", s.Addr())
	}
	if addr, id := s.Leader(); addr != s.Addr() || id != "n1" {
		t.Errorf("Leader() = %q, %q; want %q, n1", addr, id, s.Addr())
	}
	if st := s.Stats(); st["state"] != "Leader" {
		t.Errorf("Stats()[state] = %q", st["state"])
	}

	v := mustApply(t, s, createKeyCmd("k1", "s1", "gpt-4o"))
	sk, ok := v.(*pb.StoredKey)
	if !ok || sk.Key.Id != "k1" || sk.Key.CreatedAt == nil {
		t.Fatalf("Apply result = %v", v)
	}
	st := s.State()
	if k := st.KeyByHash(HashSecret("s1")); k == nil || k.ID != "k1" || !k.Allows("gpt-4o") {
		t.Errorf("KeyByHash = %+v", k)
	}
	idx := st.Index
	if idx == 0 {
		t.Error("Index = 0 after an apply")
	}
	// The proposer stamps the time.
	if got := sk.Key.CreatedAt.AsTime(); time.Since(got) > time.Minute || time.Since(got) < 0 {
		t.Errorf("CreatedAt = %v, want about now", got)
	}
	// A set time is kept.
	v = mustApply(t, s, at(createKeyCmd("k2", "s2"), baseNanos))
	if got := v.(*pb.StoredKey).Key.CreatedAt.AsTime().UnixNano(); got != baseNanos {
		t.Errorf("CreatedAt = %d, want the command's %d", got, baseNanos)
	}
	if err := s.WaitForIndex(ctxT(t), idx+1); err != nil {
		t.Errorf("WaitForIndex: %v", err)
	}

	// Errors from the FSM propagate and leave the state alone.
	before := s.State()
	for _, tc := range []struct {
		cmd  *pb.Command
		want error
	}{
		{revokeKeyCmd("nope"), ErrNotFound},
		{createKeyCmd("k1", "other"), ErrAlreadyExists},
		{createKeyCmd("", "x"), ErrInvalid},
		{revokeKeyCmd("k1"), nil},
		{rotateKeyCmd("k1", "s1b"), ErrFailedPrecondition},
	} {
		v, err := s.Apply(ctxT(t), tc.cmd)
		if !errors.Is(err, tc.want) {
			t.Errorf("Apply(%v) err = %v, want %v", tc.cmd, err, tc.want)
		}
		if err != nil && v != nil {
			t.Errorf("Apply(%v) returned %v with an error", tc.cmd, v)
		}
	}
	if before.KeyByHash(HashSecret("s1")).Revoked {
		t.Error("old state changed")
	}
	if !s.State().KeyByHash(HashSecret("s1")).Revoked {
		t.Error("revoke not applied")
	}

	populate(t, s, "p-")
	checkPopulated(t, s.State(), "p-")
}

func TestStoreApplyContext(t *testing.T) {
	t.Parallel()
	s := openReady(t, testConfig(t.TempDir()))
	idx := s.State().Index

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Apply(ctx, createKeyCmd("k1", "s1")); !errors.Is(err, context.Canceled) {
		t.Errorf("Apply on a cancelled context: err = %v", err)
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := s.Apply(ctx, createKeyCmd("k1", "s1")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Apply past its deadline: err = %v", err)
	}
	if s.State().Key("k1") != nil || s.State().Index != idx {
		t.Error("a refused Apply changed the state")
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := s.WaitForIndex(ctx, idx+100); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitForIndex on a cancelled context: err = %v", err)
	}
	// WaitForIndex wakes up when a later apply reaches the index.
	done := make(chan error, 1)
	go func() { done <- s.WaitForIndex(ctxT(t), idx+1) }()
	mustApply(t, s, createKeyCmd("k1", "s1"))
	if err := <-done; err != nil {
		t.Errorf("WaitForIndex: %v", err)
	}
}

func TestStoreClosed(t *testing.T) {
	t.Parallel()
	s := openReady(t, testConfig(t.TempDir()))
	mustApply(t, s, createKeyCmd("k1", "s1"))
	closeStore(t, s)
	if _, err := s.Apply(ctxT(t), createKeyCmd("k2", "s2")); !errors.Is(err, ErrClosed) {
		t.Errorf("Apply after Close: err = %v, want ErrClosed", err)
	}
	if s.State().Key("k1") == nil {
		t.Error("State() lost data after Close")
	}
}

// TestStoreRestartReplaysLog closes the store and reopens the directory:
// with no snapshot, the state comes back by replaying the log.
func TestStoreRestartReplaysLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(dir)
	s := openReady(t, cfg)
	populate(t, s, "a-")
	populate(t, s, "b-")
	want := snapBytes(t, s.State())
	wantIndex := s.State().Index
	closeStore(t, s)

	s2 := openReady(t, cfg)
	if s2.Fresh() {
		t.Error("Fresh() = true on reopen")
	}
	if n := s2.Stats()["last_snapshot_index"]; n != "0" {
		t.Errorf("last_snapshot_index = %s, want no snapshot", n)
	}
	st := s2.State()
	if st.Index != wantIndex {
		t.Errorf("Index = %d, want %d", st.Index, wantIndex)
	}
	if !bytes.Equal(snapBytes(t, st), want) {
		t.Errorf("recovered state differs:\n got %v\nwant %v", snapshotOf(st), snapshotOf(fromBytes(t, want)))
	}
	checkPopulated(t, st, "a-")
	checkPopulated(t, st, "b-")

	// The reopened store keeps working, and its state survives another
	// restart.
	populate(t, s2, "c-")
	want = snapBytes(t, s2.State())
	closeStore(t, s2)
	s3 := openReady(t, cfg)
	if !bytes.Equal(snapBytes(t, s3.State()), want) {
		t.Error("state after the second restart differs")
	}
}

// TestStoreRestartFromSnapshot snapshots, applies more, then removes the
// log entries the snapshot covers (as Raft's compaction would) before
// reopening: recovery must use the snapshot plus the log tail.
func TestStoreRestartFromSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(dir)
	s := openReady(t, cfg)
	populate(t, s, "a-")
	atSnapshot := s.State().Index
	if err := s.SnapshotNow(); err != nil {
		t.Fatalf("SnapshotNow: %v", err)
	}
	snapIndex, err := strconv.ParseUint(s.Stats()["last_snapshot_index"], 10, 64)
	if err != nil || snapIndex < atSnapshot {
		t.Fatalf("last_snapshot_index = %q, want ≥ %d", s.Stats()["last_snapshot_index"], atSnapshot)
	}
	populate(t, s, "b-")
	mustApply(t, s, revokeKeyCmd("a-k1"), deleteRouteCmd("a-route"))
	want := snapBytes(t, s.State())
	closeStore(t, s)

	snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
	if len(snaps) != 1 {
		t.Fatalf("snapshot files: %v", snaps)
	}
	compactLog(t, dir, snapIndex)

	s2 := openStore(t, cfg)
	t.Cleanup(func() { _ = s2.Close() })
	if s2.Fresh() {
		t.Error("Fresh() = true on reopen")
	}
	// The snapshot is restored inside Open, before any leader exists.
	if st := s2.State(); st.Index < atSnapshot || st.Key("a-k1") == nil {
		t.Errorf("after Open: Index %d (want ≥ %d), key a-k1 %v", st.Index, atSnapshot, st.Key("a-k1"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s2.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	st := s2.State()
	if !bytes.Equal(snapBytes(t, st), want) {
		t.Errorf("recovered state differs:\n got %v\nwant %v", snapshotOf(st), snapshotOf(fromBytes(t, want)))
	}
	checkPopulated(t, st, "b-")
	if k := st.KeyByHash(HashSecret("a-s1")); k == nil || !k.Revoked {
		t.Errorf("a-k1 = %+v, want revoked (from the log tail)", k)
	}
	if st.Route("a-route") != nil {
		t.Error("a-route survived its deletion in the log tail")
	}
	mustApply(t, s2, createKeyCmd("after", "after"))
}

// compactLog deletes the log entries up to index from the closed store's
// log.
func compactLog(t *testing.T, dir string, index uint64) {
	t.Helper()
	bolt, _, err := openLogStore(dir, hclog.NewNullLogger(), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	first, err := bolt.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if err := bolt.DeleteRange(first, index); err != nil {
		t.Fatal(err)
	}
	if first, _ = bolt.FirstIndex(); first != index+1 {
		t.Fatalf("first index after compaction = %d, want %d", first, index+1)
	}
}

func fromBytes(t *testing.T, b []byte) *State {
	var snap pb.Snapshot
	if err := proto.Unmarshal(b, &snap); err != nil {
		t.Fatal(err)
	}
	st, err := stateFromSnapshot(&snap, nil, DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A node without Raft state and without Bootstrap has no cluster: it never
// becomes ready and refuses writes.
func TestStoreNoBootstrap(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir())
	cfg.Bootstrap = false
	s := openStore(t, cfg)
	defer closeStore(t, s)
	if !s.Fresh() {
		t.Error("Fresh() = false")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := s.WaitReady(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitReady: err = %v, want DeadlineExceeded", err)
	}
	if _, err := s.Apply(ctxT(t), createKeyCmd("k", "s")); !errors.Is(err, ErrNotLeader) {
		t.Errorf("Apply: err = %v, want ErrNotLeader", err)
	}
	if s.IsLeader() {
		t.Error("IsLeader() = true")
	}
	if addr, id := s.Leader(); addr != "" || id != "" {
		t.Errorf("Leader() = %q, %q", addr, id)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir())
	cfg.NodeID = ""
	if _, err := Open(cfg); err == nil {
		t.Error("Open with an empty NodeID succeeded")
	}

	for _, addr := range []string{"0.0.0.0:0", ":0", "not an address"} {
		cfg := testConfig(t.TempDir())
		cfg.BindAddr = addr
		if s, err := Open(cfg); err == nil {
			_ = s.Close()
			t.Errorf("Open with unadvertisable address %q succeeded", addr)
		}
	}

	// A failed Open releases raft.db, so the directory can be opened again.
	dir := t.TempDir()
	cfg = testConfig(dir)
	cfg.BindAddr = "0.0.0.0:0"
	if _, err := Open(cfg); err == nil {
		t.Fatal("Open succeeded")
	}
	s := openReady(t, testConfig(dir))
	mustApply(t, s, createKeyCmd("k", "s"))

	// A file where the directory should be.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = testConfig(file)
	if _, err := Open(cfg); err == nil {
		t.Error("Open on a file succeeded")
	}
}

func TestOpenAdvertiseAddr(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir())
	cfg.BindAddr = "127.0.0.1:0"
	cfg.AdvertiseAddr = "127.0.0.2:7946"
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	if s.Addr() != "127.0.0.2:7946" {
		t.Errorf("Addr() = %q, want the advertise address", s.Addr())
	}
}

func TestLastCommandIndex(t *testing.T) {
	logs := raft.NewInmemStore()
	idx, err := lastCommandIndex(logs)
	if err != nil || idx != 0 {
		t.Errorf("empty log: %d, %v", idx, err)
	}
	entries := []*raft.Log{
		{Index: 1, Type: raft.LogConfiguration},
		{Index: 2, Type: raft.LogNoop},
		{Index: 3, Type: raft.LogCommand},
		{Index: 4, Type: raft.LogCommand},
		{Index: 5, Type: raft.LogNoop},
		{Index: 6, Type: raft.LogConfiguration},
		{Index: 7, Type: raft.LogBarrier},
	}
	if err := logs.StoreLogs(entries[:2]); err != nil {
		t.Fatal(err)
	}
	if idx, err := lastCommandIndex(logs); err != nil || idx != 0 {
		t.Errorf("no commands: %d, %v", idx, err)
	}
	if err := logs.StoreLogs(entries[2:]); err != nil {
		t.Fatal(err)
	}
	if idx, err := lastCommandIndex(logs); err != nil || idx != 4 {
		t.Errorf("got %d, %v; want 4", idx, err)
	}
	// Compacted past every command.
	if err := logs.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	if idx, err := lastCommandIndex(logs); err != nil || idx != 0 {
		t.Errorf("compacted: %d, %v", idx, err)
	}
}
