package node

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/raftstore"
)

// --raft-log-store wal (Config.Raft.LogStore) reaches the Raft store: a new
// node's log is in raft/wal/ and no raft.db is made.
func TestNodeKeepsItsRaftLogInTheStoreItAsksFor(t *testing.T) {
	cfg := baseConfig(t, "wal", testLogger(t))
	cfg.Raft.LogStore = raftstore.LogStoreWAL
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	if got := tn.n.Store().LogStoreKind(); got != raftstore.LogStoreWAL {
		t.Fatalf("LogStoreKind() = %q, want %q", got, raftstore.LogStoreWAL)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "raft", "raft.db")); !os.IsNotExist(err) {
		t.Fatalf("a node asked for the WAL has raft.db (err %v)", err)
	}
}
