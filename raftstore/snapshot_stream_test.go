package raftstore

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// records splits a streamed snapshot into its record kinds.
func records(t *testing.T, data []byte) []byte {
	t.Helper()
	if !bytes.HasPrefix(data, []byte(snapshotMagic)) {
		t.Fatalf("no magic: % x", data[:min(len(data), 8)])
	}
	r := bufio.NewReader(bytes.NewReader(data[len(snapshotMagic):]))
	var kinds []byte
	for {
		kind, _, err := readRecord(r)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return kinds
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, kind)
	}
}

// TestSnapshotStreamsInRecords persists a state of 3,000 keys: the
// snapshot is a header, parts of at most snapshotChunk keys, and an end
// record; it restores to the same state, and the same stream cut off
// before its end record is refused.
func TestSnapshotStreamsInRecords(t *testing.T) {
	h := rich(t)
	big := bigState(3000)
	st := h.state().withKeys(func(kw *keyWriter) {
		big.keysByCreated.ascend(func(k *Key) bool {
			kw.putKey(k)
			return true
		})
	})
	h.f.state.Store(st)
	data := persist(t, h.f)
	kinds := records(t, data)
	keyParts := (3000 + 3 + snapshotChunk - 1) / snapshotChunk
	if len(kinds) < 2+keyParts || kinds[0] != recordHeader || kinds[len(kinds)-1] != recordEnd {
		t.Fatalf("record kinds %q", kinds)
	}
	compareStates(t, restored(t, data), st)

	// Cut before the end record: the last bytes are the end record's kind
	// and zero length.
	cut := data[:len(data)-2]
	f := newFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(cut))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Restore of a cut stream: %v", err)
	}
	if f.state.Load().KeyCount() != 0 {
		t.Error("a cut stream replaced the state")
	}
}

// TestRestoreReadsSingleMessageSnapshot restores the form older releases
// wrote (one Snapshot message) and an admin snapshot's bytes.
func TestRestoreReadsSingleMessageSnapshot(t *testing.T) {
	want := rich(t).state()
	legacy, err := proto.MarshalOptions{Deterministic: true}.Marshal(snapshotOf(want))
	if err != nil {
		t.Fatal(err)
	}
	compareStates(t, restored(t, legacy), want)
}

// TestFollowerSnapshotsAtShutdown: a follower of a two-node cluster takes a
// snapshot in SnapshotForRestart, so its next start restores instead of
// replaying the log.
func TestFollowerSnapshotsAtShutdown(t *testing.T) {
	// With two voters the leader keeps its lease only while the follower
	// answers within LeaderLeaseTimeout: testConfig's 50 ms lost it under
	// load (a stalled fsync or a starved CPU on the new follower; "leadership
	// lost while committing log" at the first Apply), which is not what this
	// test pins. 500 ms only makes the first election slower.
	patient := func(cfg Config) Config {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
		return cfg
	}
	leader := openReady(t, patient(testConfig(t.TempDir())))
	waitLeader(t, leader)
	cfg2 := patient(testConfig(t.TempDir()))
	cfg2.NodeID, cfg2.Bootstrap = "n2", false
	follower := openStore(t, cfg2)
	t.Cleanup(func() { _ = follower.Close() })
	if err := leader.AddServer(Server{ID: "n2", Address: follower.Addr(), Voter: true}); err != nil {
		t.Fatal(err)
	}
	mustApply(t, leader, createKeyCmd("k1", "s1"))
	if err := follower.WaitForIndex(ctxT(t), leader.State().Index); err != nil {
		t.Fatal(err)
	}
	follower.SnapshotForRestart()
	idx, err := strconv.ParseUint(follower.Stats()["last_snapshot_index"], 10, 64)
	if err != nil || idx < leader.State().Index {
		t.Fatalf("follower's last_snapshot_index = %q", follower.Stats()["last_snapshot_index"])
	}
	if snaps, _ := filepath.Glob(filepath.Join(cfg2.Dir, "snapshots", "*", "state.bin")); len(snaps) != 1 {
		t.Fatalf("follower snapshot files: %v", snaps)
	}
}

// A snapshot that holds a key id twice is refused, whether the second
// comes in the same part or a later one (the decoder then stops with
// records still unread), and the old state stays.
func TestRestoreRefusesKeyTwice(t *testing.T) {
	key := func(id, secret string) *pb.StoredKey {
		return &pb.StoredKey{Key: &pb.Key{Id: id, Name: id}, SecretHash: hashOf(secret)}
	}
	stream := func(parts ...*pb.Snapshot) []byte {
		var buf bytes.Buffer
		buf.WriteString(snapshotMagic)
		if err := writeRecord(&buf, recordHeader, &pb.SnapshotHeader{FormatVersion: snapshotFormat, Index: 9}); err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if err := writeRecord(&buf, recordPart, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := writeRecord(&buf, recordEnd, nil); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	filler := make([]*pb.Snapshot, 20)
	for i := range filler {
		filler[i] = &pb.Snapshot{Keys: []*pb.StoredKey{key("f"+strconv.Itoa(i), "fs"+strconv.Itoa(i))}}
	}
	for name, data := range map[string][]byte{
		"one part":  stream(&pb.Snapshot{Keys: []*pb.StoredKey{key("k1", "a"), key("k1", "b")}}),
		"two parts": stream(append([]*pb.Snapshot{{Keys: []*pb.StoredKey{key("k1", "a")}}, {Keys: []*pb.StoredKey{key("k1", "b")}}}, filler...)...),
	} {
		h := rich(t)
		before := freeze(h.state())
		if err := h.f.Restore(io.NopCloser(bytes.NewReader(data))); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Restore: %v, want ErrInvalid", name, err)
		}
		if h.state() != before.st {
			t.Errorf("%s: the state was replaced", name)
		}
		before.checkUnchanged(t)
	}
	good := stream(filler...)
	if st := restored(t, good); st.KeyCount() != len(filler) || st.Index != 9 {
		t.Errorf("restored %d keys at index %d, want %d at 9", st.KeyCount(), st.Index, len(filler))
	}
}
