package admin

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// A call may carry a header more than once. The first value decides, for
// the token as for the request id and the forwarded actor (a follower
// forwards all the values, in order, so the leader decides alike): a
// second value neither lends its rights nor its address.
func TestTheFirstValueOfARepeatedHeaderDecides(t *testing.T) {
	e := startRBAC(t)
	ctx := ctxT(t)
	teams := pb.NewTeamServiceClient(dial(t, e.addr, "")) // no token of its own
	create := func(name string, auth ...string) error {
		kv := make([]string, 0, 2*len(auth))
		for _, a := range auth {
			kv = append(kv, "authorization", a)
		}
		_, err := teams.CreateTeam(metadata.AppendToOutgoingContext(ctx, kv...), &pb.CreateTeamRequest{Name: name})
		return err
	}
	viewer, admin := "Bearer "+e.tokens[raftstore.RoleViewer], "Bearer "+testBootstrapToken
	wantCode(t, create("a", viewer, admin), codes.PermissionDenied)
	wantCode(t, create("b", "Bearer wrong", admin), codes.Unauthenticated)
	wantCode(t, create("c", "", admin), codes.Unauthenticated)
	mustOK(t, create("d", admin, "Bearer wrong"))

	rctx := metadata.NewIncomingContext(ctx, metadata.Pairs(MetadataRequestID, "first", MetadataRequestID, "has space"))
	if id, err := RequestID(rctx); err != nil || id != "first" {
		t.Errorf("RequestID of two values = %q, %v; want the first", id, err)
	}

	const cs = "cluster-secret-for-tests"
	if _, err := e.store.Apply(ctx, &pb.Command{Op: &pb.Command_SetClusterSecret{SetClusterSecret: &pb.SetClusterSecretCommand{Secret: cs}}}); err != nil {
		t.Fatal(err)
	}
	good := actorMD(t, &pb.Actor{User: "operator-user", Address: "192.0.2.7:5555"})
	forged := actorMD(t, &pb.Actor{User: "operator-user", Address: "198.51.100.1:1"})
	ops := pb.NewTeamServiceClient(dial(t, e.addr, e.tokens[raftstore.RoleOperator]))
	for i, c := range []struct {
		kv   []string
		want func(addr string) bool
	}{
		{[]string{MetadataActor, forged, MetadataActorMAC, actorMAC("guessed", []byte(forged)),
			MetadataActor, good, MetadataActorMAC, actorMAC(cs, []byte(good))}, func(a string) bool { return strings.HasPrefix(a, "127.0.0.1:") }},
		{[]string{MetadataActor, good, MetadataActorMAC, actorMAC(cs, []byte(good)),
			MetadataActor, forged, MetadataActorMAC, actorMAC("guessed", []byte(forged))}, func(a string) bool { return a == "192.0.2.7:5555" }},
	} {
		_, err := ops.CreateTeam(metadata.AppendToOutgoingContext(ctx, c.kv...), &pb.CreateTeamRequest{Name: fmt.Sprintf("fwd-%d", i)})
		mustOK(t, err)
		if addr := lastAudit(t, e).GetAddress(); !c.want(addr) {
			t.Errorf("audit address %q; want the first actor's, or the peer's when the first is not vouched for", addr)
		}
	}
}
