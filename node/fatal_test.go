package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// TestNodeStopsOnUnknownCommand commits a command of a type this release
// does not know (as a newer leader would): the node stops with an error
// that says to upgrade, rather than skip it and serve a forked state.
func TestNodeStopsOnUnknownCommand(t *testing.T) {
	tn := startNode(t, baseConfig(t, "solo", testLogger(t)))
	tn.waitReady(20 * time.Second)

	data, err := proto.Marshal(&pb.Command{UnixNanos: time.Now().UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	data = protowire.AppendTag(data, 999, protowire.BytesType) // an op of a later release
	data = protowire.AppendBytes(data, []byte{0x08, 0x01})
	var cmd pb.Command
	if err := proto.Unmarshal(data, &cmd); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = tn.n.store.Apply(ctx, &cmd) // its result does not matter: the node must stop

	select {
	case <-tn.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the node kept running after a command it cannot apply")
	}
	tn.mu.Lock()
	err = tn.runErr
	tn.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "upgrade this node") {
		t.Fatalf("Run returned %v, want an error that says to upgrade", err)
	}
}
