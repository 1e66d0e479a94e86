package admin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// losingLeader is a store whose first Apply commits the command and then
// reports that leadership was lost before the result came back, as
// hashicorp/raft does with ErrLeadershipLost when a leader steps down
// after appending an entry that the next leader commits.
type losingLeader struct {
	*raftstore.Store
	mu       sync.Mutex
	lost     int // how many applies still commit and then fail
	commands []*pb.Command
}

func (l *losingLeader) Apply(ctx context.Context, cmd *pb.Command) (proto.Message, error) {
	l.mu.Lock()
	l.commands = append(l.commands, proto.Clone(cmd).(*pb.Command))
	lose := l.lost > 0
	l.lost--
	l.mu.Unlock()
	res, err := l.Store.Apply(ctx, cmd)
	if lose && err == nil {
		return nil, fmt.Errorf("%w: leadership lost while committing log", raftstore.ErrNotLeader)
	}
	return res, err
}

func withRequestID(ctx context.Context, id string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, MetadataRequestID, id)
}

func TestCreateKeyRetriedAfterLeadershipLostMakesOneKey(t *testing.T) {
	store := &losingLeader{Store: openStore(t), lost: 1}
	env := startServer(t, store)
	ctx := withRequestID(ctxT(t), "req-1")
	req := &pb.CreateKeyRequest{Name: "svc", SecretSeed: NewSecretSeed()}

	_, err := env.keys.CreateKey(ctx, req)
	wantCode(t, err, codes.Unavailable) // what tollctl retries
	resp, err := env.keys.CreateKey(ctx, req)
	mustOK(t, err)

	st := store.State()
	if n := len(st.Keys()); n != 1 {
		t.Fatalf("%d keys after a retried create, want 1", n)
	}
	k := st.KeyByHash(raftstore.HashSecret(resp.GetSecret()))
	if k == nil || resp.GetKey().GetId() != st.Keys()[0].GetKey().GetId() {
		t.Fatalf("the retry's secret %q does not open the one key %s", resp.GetSecret()[:10], st.Keys()[0].GetKey().GetId())
	}
	for _, c := range store.commands {
		if c.GetRequestId() != "req-1" {
			t.Errorf("command carries request id %q, want req-1", c.GetRequestId())
		}
	}
	if a, b := store.commands[0].GetCreateKey(), store.commands[1].GetCreateKey(); !proto.Equal(a, b) {
		t.Errorf("the retry proposed a different key:\n%v\n%v", a, b)
	}
}

func TestCreateKeyRetryWithoutSeedSaysRotate(t *testing.T) {
	store := &losingLeader{Store: openStore(t), lost: 1}
	env := startServer(t, store)
	ctx := withRequestID(ctxT(t), "req-2")

	_, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "svc"})
	wantCode(t, err, codes.Unavailable)
	_, err = env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "svc"})
	st := wantCode(t, err, codes.FailedPrecondition)
	id := store.State().Keys()[0].GetKey().GetId()
	if !strings.Contains(st.Message(), "tollctl key rotate "+id) {
		t.Errorf("message %q does not say to rotate %s", st.Message(), id)
	}
	if n := len(store.State().Keys()); n != 1 {
		t.Fatalf("%d keys, want 1", n)
	}
}

func TestRotateKeyRetriedGivesTheAppliedSecret(t *testing.T) {
	store := &losingLeader{Store: openStore(t)}
	env := startServer(t, store)
	created, err := env.keys.CreateKey(ctxT(t), &pb.CreateKeyRequest{Name: "svc"})
	mustOK(t, err)
	store.lost = 1
	ctx := withRequestID(ctxT(t), "req-3")
	req := &pb.RotateKeyRequest{Id: created.GetKey().GetId(), SecretSeed: NewSecretSeed()}
	_, err = env.keys.RotateKey(ctx, req)
	wantCode(t, err, codes.Unavailable)
	resp, err := env.keys.RotateKey(ctx, req)
	mustOK(t, err)
	if store.State().KeyByHash(raftstore.HashSecret(resp.GetSecret())) == nil {
		t.Fatal("the retried rotate's secret does not open the key")
	}
}

func TestCreateTeamRetriedAfterLeadershipLostMakesOneTeam(t *testing.T) {
	store := &losingLeader{Store: openStore(t), lost: 1}
	env := startServer(t, store)
	ctx := withRequestID(ctxT(t), "req-4")

	_, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "search"})
	wantCode(t, err, codes.Unavailable)
	resp, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "search"})
	mustOK(t, err)
	teams := store.State().Teams()
	if len(teams) != 1 || teams[0].GetId() != resp.GetTeam().GetId() {
		t.Fatalf("teams after a retried create: %v, answer %s; want one", teams, resp.GetTeam().GetId())
	}
	// The same request id for another team is not taken for a retry.
	_, err = env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "other"})
	wantCode(t, err, codes.AlreadyExists)
}

func TestRequestIDChecked(t *testing.T) {
	env := startServer(t, openStore(t))
	for _, id := range []string{strings.Repeat("x", maxRequestIDLen+1), "has space"} {
		_, err := env.keys.CreateKey(withRequestID(ctxT(t), id), &pb.CreateKeyRequest{Name: "svc"})
		wantCode(t, err, codes.InvalidArgument)
	}
	_, err := env.keys.CreateKey(ctxT(t), &pb.CreateKeyRequest{Name: "svc", SecretSeed: []byte("short")})
	wantCode(t, err, codes.InvalidArgument)
}
