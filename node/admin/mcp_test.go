package admin

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

type fakeProbe struct{}

func (fakeProbe) Status(name string) *pb.McpServerStatus {
	return &pb.McpServerStatus{Node: "n1", State: "connected", Tools: []string{"t"}}
}

func (fakeProbe) Test(context.Context, *pb.McpServer) *pb.TestMcpServerResponse {
	return &pb.TestMcpServerResponse{Ok: true, Node: "n1"}
}

// startMcp serves the admin API with McpService over a store that seals
// secrets.
func startMcp(t *testing.T) (*raftstore.Store, pb.McpServiceClient, pb.KeyServiceClient) {
	sealer, err := raftstore.NewSealer(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	store, err := raftstore.Open(raftstore.Config{Dir: t.TempDir(), NodeID: "n1", BindAddr: "127.0.0.1:0", Bootstrap: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LogLevel: "error", Secrets: sealer,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if err := store.WaitReady(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Store: store, BootstrapToken: testBootstrapToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	g := grpc.NewServer(grpc.UnaryInterceptor(srv.UnaryInterceptor()))
	srv.Register(g)
	srv.RegisterMcp(g, fakeProbe{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn := dial(t, lis.Addr().String(), testBootstrapToken)
	return store, pb.NewMcpServiceClient(conn), pb.NewKeyServiceClient(conn)
}

func TestMcpServerHeadersSealedAndNeverShown(t *testing.T) {
	store, api, _ := startMcp(t)
	ctx := ctxT(t)
	resp, err := api.AddMcpServer(ctx, &pb.AddMcpServerRequest{Server: &pb.McpServer{Name: "gh", Url: "https://mcp.example/mcp",
		Headers: map[string]string{"Authorization": "Bearer ghp-secret-value"}, PricePerCallNanos: 2_000_000}})
	mustOK(t, err)
	if got := resp.GetServer().GetHeaderNames(); len(got) != 1 || got[0] != "Authorization" {
		t.Fatalf("header names %v", got)
	}
	stored := store.State().McpServer("gh").GetHeaders()["Authorization"]
	if !raftstore.IsSealed(stored) {
		t.Fatalf("stored header in the clear: %q", stored)
	}
	list, err := api.ListMcpServers(ctx, &pb.ListMcpServersRequest{})
	mustOK(t, err)
	get, err := api.GetMcpServer(ctx, &pb.GetMcpServerRequest{Name: "gh"})
	mustOK(t, err)
	for _, b := range []string{protojson.Format(list), protojson.Format(get)} {
		if strings.Contains(b, "ghp-secret") || strings.Contains(b, "tgsealed") {
			t.Fatalf("a header value is shown: %s", b)
		}
	}
	if get.GetStatus().GetState() != "connected" || get.GetServer().GetPricePerCallNanos() != 2_000_000 {
		t.Fatalf("get %v", get)
	}
	_, err = api.AddMcpServer(ctx, &pb.AddMcpServerRequest{Server: &pb.McpServer{Name: "gh", Url: "https://x/mcp"}})
	wantCode(t, err, codes.AlreadyExists)
	_, err = api.AddMcpServer(ctx, &pb.AddMcpServerRequest{Server: &pb.McpServer{Name: "x", Url: "https://x/mcp",
		Headers: map[string]string{"A": stored}}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = api.AddMcpServer(ctx, &pb.AddMcpServerRequest{Server: &pb.McpServer{Name: "bad__name", Url: "https://x/mcp"}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = api.RemoveMcpServer(ctx, &pb.RemoveMcpServerRequest{Name: "gh"})
	mustOK(t, err)
	_, err = api.GetMcpServer(ctx, &pb.GetMcpServerRequest{Name: "gh"})
	wantCode(t, err, codes.NotFound)
}

func TestSetMcpToolsOnKey(t *testing.T) {
	store, api, keys := startMcp(t)
	ctx := ctxT(t)
	k, err := keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "agent"})
	mustOK(t, err)
	id := k.GetKey().GetId()
	resp, err := api.SetMcpTools(ctx, &pb.SetMcpToolsRequest{KeyId: id, Tools: []string{"gh__*", "*__read_*", "gh__*"}})
	mustOK(t, err)
	if got := resp.GetTools(); len(got) != 2 {
		t.Fatalf("tools %v", got)
	}
	if !store.State().McpPolicy(id, "").Allows("fs__read_file") {
		t.Fatal("the list is not in force")
	}
	_, err = api.SetMcpTools(ctx, &pb.SetMcpToolsRequest{Tools: []string{"*"}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = api.SetMcpTools(ctx, &pb.SetMcpToolsRequest{KeyId: "key_nope", Tools: []string{"*"}})
	wantCode(t, err, codes.NotFound)
}
