package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
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
		old.n.gossip.changeMeta(func(m *memberMeta) { m.Version, m.Cmds = version, cmds })
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
	}
	// Commands every release applies still go through.
	createKey(t, followers[1], "legacy-command")

	advertise("v1.0", commandsMeta())
	if err := importKeys(); err != nil {
		t.Fatalf("import once every member applies it: %v", err)
	}
	st, err := leader.cluster().Status(adminCtx(t), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m := memberByID(st, old.id); m.GetVersion() != "v1.0" {
		t.Errorf("Status shows %s's release as %q, want v1.0", old.id, m.GetVersion())
	}
}
