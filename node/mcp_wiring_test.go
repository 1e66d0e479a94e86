package node

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// An MCP server added through the admin API (forwarded like every write)
// has its header sealed; after a secrets-key rotation the leader reseals
// it with the new key, and it still opens to the value given.
func TestMcpSecretsSealedAndResealedOnRotation(t *testing.T) {
	oldKey, newKey := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(oldKey)
	_, _ = rand.Read(newKey)
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.RaftAddr = localAddr(freePort(t, false))
	cfg.SecretsKey = oldKey
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	mcp := pb.NewMcpServiceClient(tn.grpcConn())
	if _, err := mcp.AddMcpServer(adminCtx(t), &pb.AddMcpServerRequest{Server: &pb.McpServer{Name: "gh",
		Url: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer mcp-upstream-secret"}}}); err != nil {
		t.Fatal(err)
	}
	oldSealer, _ := raftstore.NewSealer(oldKey)
	if v := tn.n.Store().State().McpServer("gh").GetHeaders()["Authorization"]; !oldSealer.Current(v) {
		t.Fatalf("stored header %q, want sealed with the key", v)
	}
	tn.stop(15 * time.Second)

	cfg.SecretsKey, cfg.SecretsOldKeys = newKey, [][]byte{oldKey}
	tn = startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	newSealer, _ := raftstore.NewSealer(newKey)
	eventually(t, 15*time.Second, "the mcp header resealed with the new key", func() error {
		st := tn.n.Store().State()
		m := st.McpServer("gh")
		v := m.GetHeaders()["Authorization"]
		if !newSealer.Current(v) {
			return fmt.Errorf("header %q", v)
		}
		if clear, err := st.OpenMcpSecret("gh", "header", "Authorization", v); err != nil || clear != "Bearer mcp-upstream-secret" {
			return fmt.Errorf("opens to %q, %v", clear, err)
		}
		return nil
	})
}
