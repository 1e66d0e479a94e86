package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// The leader proposes a command type only when every member applies it:
// while one member advertises an older release (here: no import_keys, or
// nothing at all, as releases before the advertisement), an import is
// refused with the member named, and it goes through once the member
// advertises it.
func TestLeaderProposesOnlyWhatEveryMemberApplies(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := split(t, nodes)
	old := followers[0]
	importKeys := func() error {
		_, err := followers[1].keys().ImportKeys(adminCtx(t), &pb.ImportKeysRequest{ImportId: "imp",
			Keys: []*pb.ImportedKey{{Name: "imported"}}})
		return err
	}
	advertise := func(version, cmds string) {
		old.n.gossip.changeMeta(func(m *memberMeta) {
			m.Version, m.Cmds, m.Snap = version, cmds, raftstore.StreamedSnapshotFormat
			if cmds == "" { // a release before the advertisements
				m.Snap = 0
			}
		})
		eventually(t, 10*time.Second, "the leader to hear "+old.id+"'s release", func() error {
			if m := leader.n.gossip.snapshot()[old.id].meta; m.Version != version || m.Cmds != cmds {
				return fmt.Errorf("leader sees %q %q", m.Version, m.Cmds)
			}
			return nil
		})
	}

	without := strings.ReplaceAll(","+commandsMeta()+",", ",14,", ",")
	for _, tc := range []struct{ version, cmds, want string }{
		{"v0.9", strings.Trim(without, ","), "node " + old.id + " runs release v0.9, which does not apply import_keys"},
		{"", "", "node " + old.id + " runs release (an older one), which does not apply import_keys"},
	} {
		advertise(tc.version, tc.cmds)
		err := importKeys()
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), tc.want) {
			t.Fatalf("import while %s advertises %q: %v; want FailedPrecondition %q", old.id, tc.cmds, err, tc.want)
		}
		if n := keysNamed(leader, "imported"); n != 0 {
			t.Fatalf("%d keys imported", n)
		}
		if got, want := leader.n.peerSnapshotFormat(), snapshotFormatOf(memberMeta{Cmds: tc.cmds}); got != want {
			t.Errorf("snapshot format for %s advertising %q: %d, want %d", old.id, tc.cmds, got, want)
		}
	}
	if got := leader.n.peerSnapshotFormat(); got != raftstore.SingleMessageSnapshotFormat {
		t.Errorf("snapshot format with a member of a release before the advertisements: %d", got)
	}
	// Commands every release applies still go through.
	createKey(t, followers[1], "legacy-command")

	advertise("v1.0", commandsMeta())
	if err := importKeys(); err != nil {
		t.Fatalf("import once every member applies it: %v", err)
	}
	if got := leader.n.peerSnapshotFormat(); got != raftstore.StreamedSnapshotFormat {
		t.Errorf("snapshot format once every member advertises it: %d", got)
	}
	st, err := leader.cluster().Status(adminCtx(t), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m := memberByID(st, old.id); m.GetVersion() != "v1.0" {
		t.Errorf("Status shows %s's release as %q, want v1.0", old.id, m.GetVersion())
	}
}

// The snapshot format a leader sends is the newest every other member
// reads: what a member advertises; the streamed one for a release that
// advertises its commands but no format (they came together); the single
// message for a release that advertises neither, or a member gossip has
// not described yet.
func TestSnapshotFormatIsTheOldestMembersNewest(t *testing.T) {
	const single, streamed = raftstore.SingleMessageSnapshotFormat, raftstore.StreamedSnapshotFormat
	servers := []raftstore.Server{{ID: "self"}, {ID: "a"}, {ID: "b"}}
	meta := func(cmds string, snap int) member {
		return member{parsed: true, meta: memberMeta{Cmds: cmds, Snap: snap}}
	}
	for _, tc := range []struct {
		name string
		ms   map[string]member
		want int
	}{
		{"all advertise it", map[string]member{"a": meta("1,2", streamed), "b": meta("1,2", streamed)}, streamed},
		{"commands without a format", map[string]member{"a": meta("1,2", 0), "b": meta("1,2", streamed)}, streamed},
		{"a release before both", map[string]member{"a": meta("", 0), "b": meta("1,2", streamed)}, single},
		{"a newer reader", map[string]member{"a": meta("1,2", streamed+1), "b": meta("1,2", streamed)}, streamed},
		{"not in gossip", map[string]member{"a": meta("1,2", streamed)}, single},
		{"not decoded", map[string]member{"a": meta("1,2", streamed), "b": {}}, single},
	} {
		if got := lowestSnapshotFormat("self", servers, tc.ms); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
