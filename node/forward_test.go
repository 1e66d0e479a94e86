package node

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// keysNamed counts the keys called name in tn's state.
func keysNamed(tn *tnode, name string) int {
	n := 0
	for _, sk := range tn.n.Store().State().Keys() {
		if sk.GetKey().GetName() == name {
			n++
		}
	}
	return n
}

// A write sent to a follower while the leader is gone is not failed back
// to the client: the follower waits for the election and sends it to the
// new leader, once.
func TestForwardedWriteFollowsTheNewLeader(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	old, survivors := split(t, nodes)
	old.crash()

	resp, err := survivors[0].keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: "during-election"})
	if err != nil {
		t.Fatalf("CreateKey through a follower right after the leader crashed: %v", err)
	}
	for _, s := range survivors {
		if s.n.Store().State().KeyByHash(raftstore.HashSecret(resp.GetSecret())) == nil {
			t.Errorf("%s lacks the key on return", s.id)
		}
		if n := keysNamed(s, "during-election"); n != 1 {
			t.Errorf("%s holds %d keys of the write, want 1", s.id, n)
		}
	}
}

// A node that cannot reach a majority of the voters answers a write at
// once with "no leader", not at the caller's deadline.
func TestMinorityWriteAnswersNoLeader(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := split(t, nodes)
	alone := followers[0]
	leader.crash()
	followers[1].crash()

	ctx := tokenCtx(t, testAdminToken, time.Minute)
	_, err := alone.keys().CreateKey(ctx, &pb.CreateKeyRequest{Name: "minority"})
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.HasPrefix(st.Message(), errNoLeaderPrefix) {
		t.Fatalf("write in a minority: %v; want Unavailable %q…", err, errNoLeaderPrefix)
	}
	if !strings.Contains(st.Message(), "reaches 1 of the 3 voters") {
		t.Errorf("message %q does not say how many voters answer", st.Message())
	}
	if n := keysNamed(alone, "minority"); n != 0 {
		t.Errorf("%d keys applied in a minority", n)
	}
}
