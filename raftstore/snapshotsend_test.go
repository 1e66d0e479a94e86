package raftstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// previousReleaseRestore is Restore as the releases before the streamed
// format wrote it (raftstore/fsm.go at 4c55a96, the data dir fixture's
// release): the whole stream read and decoded as one pb.Snapshot.
func previousReleaseRestore(rc io.Reader) (*State, error) {
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	var snap pb.Snapshot
	if err := proto.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	return stateFromSnapshot(&snap, nil, DefaultRetention)
}

// oneSnapshot is a snapshot store holding one snapshot's bytes.
type oneSnapshot struct {
	raft.SnapshotStore
	data []byte
}

func (o oneSnapshot) Open(string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	return &raft.SnapshotMeta{ID: "one", Index: 7, Size: int64(len(o.data))}, io.NopCloser(bytes.NewReader(o.data)), nil
}

func openAs(t *testing.T, data []byte, peerFormat func() int) (*raft.SnapshotMeta, []byte, error) {
	t.Helper()
	s := &formatSnapshots{SnapshotStore: oneSnapshot{data: data}}
	s.peerFormat.Store(&peerFormat)
	meta, rc, err := s.Open("one")
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	return meta, out, err
}

// richWithKeys is rich() plus n generated keys, so that the streamed
// snapshot has several key parts, and a cluster secret.
func richWithKeys(t *testing.T, n int) *State {
	h := rich(t)
	h.must(&pb.Command{Op: &pb.Command_SetClusterSecret{SetClusterSecret: &pb.SetClusterSecretCommand{Secret: "cluster-secret-0123456789"}}})
	big := bigState(n)
	return h.state().withKeys(func(kw *keyWriter) {
		big.keysByCreated.ascend(func(k *Key) bool {
			kw.putKey(k)
			return true
		})
	})
}

// While a member reads only the single-message form, a streamed snapshot
// opened from the store comes out as that form: its size announced
// ahead, the same state as the stream for a reader of the previous
// release.
func TestSnapshotOpensAsSingleMessageForOldMembers(t *testing.T) {
	st := richWithKeys(t, 2500)
	f := newFSM()
	f.state.Store(st)
	streamed := persist(t, f)
	if _, err := previousReleaseRestore(bytes.NewReader(streamed)); err == nil {
		t.Fatal("the previous release's reader decoded a streamed snapshot; this test would prove nothing")
	}

	meta, single, err := openAs(t, streamed, func() int { return SingleMessageSnapshotFormat })
	if err != nil {
		t.Fatal(err)
	}
	if meta.Size != int64(len(single)) || meta.Index != 7 {
		t.Fatalf("meta size %d index %d; %d bytes read", meta.Size, meta.Index, len(single))
	}
	var got pb.Snapshot
	if err := proto.Unmarshal(single, &got); err != nil {
		t.Fatal(err)
	}
	if want := snapshotOf(st); !proto.Equal(&got, want) {
		t.Fatal("the single message differs from the state's snapshot")
	}
	old, err := previousReleaseRestore(bytes.NewReader(single))
	if err != nil {
		t.Fatalf("the previous release's reader: %v", err)
	}
	compareStates(t, old, st)
	compareStates(t, restored(t, single), st)
}

// A snapshot goes unchanged while every member reads the streamed form,
// with no gate set, and when it is already one message.
func TestSnapshotOpensUnchangedWhenEveryMemberReadsIt(t *testing.T) {
	st := richWithKeys(t, 10)
	f := newFSM()
	f.state.Store(st)
	streamed := persist(t, f)
	single, err := proto.Marshal(snapshotOf(st))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		format func() int
	}{
		{"streamed, every member reads it", streamed, func() int { return StreamedSnapshotFormat }},
		{"streamed, no gate", streamed, nil},
		{"one message already", single, func() int { return SingleMessageSnapshotFormat }},
	} {
		meta, got, err := openAs(t, tc.data, tc.format)
		if err != nil || !bytes.Equal(got, tc.data) || meta.Size != int64(len(tc.data)) {
			t.Errorf("%s: err %v, %d bytes (size %d), want %d unchanged", tc.name, err, len(got), meta.Size, len(tc.data))
		}
	}
}

// A streamed snapshot without its end record, or with a bad record, is
// refused rather than sent short.
func TestSnapshotRewriteRefusesDamagedStream(t *testing.T) {
	f := newFSM()
	f.state.Store(richWithKeys(t, 10))
	streamed := persist(t, f)
	badKind := bytes.Clone(streamed)
	badKind[len(badKind)-2] = 'Z' // the end record's kind
	for name, data := range map[string][]byte{
		"cut before its end": streamed[:len(streamed)-2],
		"cut in a part":      streamed[:len(streamed)/2],
		"unknown record":     badKind,
	} {
		if _, _, err := openAs(t, data, func() int { return SingleMessageSnapshotFormat }); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

// previousReleaseFSM is this release's state machine with the previous
// release's Restore: a follower that has not been upgraded yet.
type previousReleaseFSM struct {
	*fsm
	restores chan error
}

func (p *previousReleaseFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := previousReleaseRestore(rc)
	if err == nil {
		p.publish(st)
	}
	select {
	case p.restores <- err:
	default:
	}
	return err
}

// startPreviousReleaseFollower starts a Raft member with an in-memory log
// and the previous release's snapshot reader.
func startPreviousReleaseFollower(t *testing.T) (*previousReleaseFSM, raft.ServerAddress) {
	t.Helper()
	old := &previousReleaseFSM{fsm: newFSM(), restores: make(chan error, 16)}
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = "old"
	rc.LogOutput = io.Discard
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	logs := raft.NewInmemStore()
	r, err := raft.NewRaft(rc, old, logs, logs, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Shutdown().Error()
		_ = trans.Close()
	})
	return old, trans.LocalAddr()
}

// A leader whose log was compacted sends a joining follower its snapshot.
// A follower of the previous release cannot decode the streamed form;
// once the leader is told that a member reads only the single message, it
// sends that, and the follower installs the whole state.
func TestOldFollowerInstallsSnapshotOnceLeaderKnowsItsFormat(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.TrailingLogs = 1
	leader := openReady(t, cfg)
	waitLeader(t, leader)
	populate(t, leader, "a")
	if err := leader.SnapshotNow(); err != nil {
		t.Fatal(err)
	}
	old, addr := startPreviousReleaseFollower(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := leader.AddServer(Server{ID: "old", Address: string(addr)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-old.restores:
		if err == nil {
			t.Fatal("the previous release restored a streamed snapshot")
		}
	case <-ctx.Done():
		t.Fatal("the leader sent no snapshot")
	}

	leader.SetPeerSnapshotFormat(func() int { return SingleMessageSnapshotFormat })
	for {
		select {
		case err := <-old.restores:
			if err == nil {
				if err := old.waitIndex(ctx, leader.State().Index); err != nil {
					t.Fatal(err)
				}
				checkPopulated(t, old.state.Load(), "a")
				return
			}
		case <-ctx.Done():
			t.Fatal("the follower never installed the snapshot")
		}
	}
}
