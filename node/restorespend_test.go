package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// Spend is counted after a snapshot is restored onto a node whose data dir
// was wiped and which kept its node id: the restored state remembers the
// old incarnation's report seqs, and the new one's are above them.
func TestSpendCountedAfterRestoreOnWipedNode(t *testing.T) {
	logger := testLogger(t)
	cfg := baseConfig(t, "solo", logger)
	first := startNode(t, cfg)
	first.waitReady(15 * time.Second)
	ctx := adminCtx(t)
	if _, err := first.models().AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "paid", Deployment: &pb.Deployment{
		Id: "d1", Provider: routing.ProviderDemo, UpstreamModel: "demo",
		Price: &pb.Price{InputMicrosPerMtok: 1_000_000, OutputMicrosPerMtok: 2_000_000}}}); err != nil {
		t.Fatal(err)
	}
	key, err := first.keys().CreateKey(ctx, &pb.CreateKeyRequest{Name: "paying",
		Budget: &pb.Budget{LimitNanos: 100_000_000_000, Period: raftstore.PeriodTotal}})
	if err != nil {
		t.Fatal(err)
	}
	keyID, budgetID := key.GetKey().GetId(), raftstore.KeyBudgetID(key.GetKey().GetId())
	for range 5 {
		if code, body := chatThrough(t, first, key.GetSecret(), "paid"); code != 200 {
			t.Fatalf("chat: %d %s", code, body)
		}
	}
	eventually(t, 15*time.Second, "the first incarnation's spend reported", func() error {
		if bp := first.n.Store().State().BudgetPeriod(budgetID, 0); bp.GetSpentNanos() == 0 {
			return fmt.Errorf("nothing reported yet")
		}
		return nil
	})
	// As if it had run for a while: a thousand reports more.
	seq := first.n.Store().State().NodeSeq("solo") + 1000
	if _, err := first.n.Store().Apply(ctx, &pb.Command{Op: &pb.Command_SpendReport{SpendReport: &pb.SpendReportCommand{
		Node: "solo", Seq: seq}}}); err != nil || first.n.Store().State().NodeSeq("solo") != seq {
		t.Fatalf("report seq %d: %v", seq, err)
	}
	snap, err := first.cluster().SaveSnapshot(ctx, &pb.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	epochFile, _ := os.ReadFile(filepath.Join(cfg.DataDir, incarnationFile))
	oldEpoch, _ := strconv.ParseInt(strings.TrimSpace(string(epochFile)), 10, 64)
	if !first.stop(10 * time.Second) {
		t.Fatal("first incarnation did not stop")
	}

	// The same id on a wiped data dir: a new single-node cluster.
	entries, _ := os.ReadDir(cfg.DataDir)
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(cfg.DataDir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Second, "a new second for the new incarnation", func() error {
		if time.Now().Unix() <= oldEpoch {
			return fmt.Errorf("still in second %d", oldEpoch)
		}
		return nil
	})
	cfg2 := cfg
	cfg2.GossipAddr = localAddr(freePort(t, true))
	second := startNode(t, cfg2)
	second.waitReady(15 * time.Second)
	// Its spend reports run (and seed their seqs from the fresh state)
	// before the restore.
	warm, err := second.keys().CreateKey(ctx, &pb.CreateKeyRequest{Name: "warm-up"})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := chatThrough(t, second, warm.GetSecret(), "demo"); code != 200 && code != 404 {
		t.Fatalf("warm-up chat: %d %s", code, body)
	}
	eventually(t, 15*time.Second, "the new incarnation's first report", func() error {
		if second.n.Store().State().NodeSeq("solo") == 0 {
			return fmt.Errorf("no report applied yet")
		}
		return nil
	})
	if _, err := second.cluster().RestoreSnapshot(ctx, &pb.RestoreSnapshotRequest{Data: snap.GetData()}); err != nil {
		t.Fatal(err)
	}
	restored := second.n.Store().State().BudgetPeriod(budgetID, 0).GetSpentNanos()
	since := time.Now()
	for range 7 {
		if code, body := chatThrough(t, second, key.GetSecret(), "paid"); code != 200 {
			t.Fatalf("chat after the restore: %d %s", code, body)
		}
	}
	logs, err := pb.NewSpendServiceClient(second.grpcConn()).SpendLogs(ctx, &pb.SpendLogsRequest{KeyId: keyID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var after int64
	n := 0
	for _, r := range logs.GetRecords() {
		if r.GetUnixNanos() >= since.UnixNano() {
			after += r.GetCostNanos()
			n++
		}
	}
	if n != 7 || after == 0 {
		t.Fatalf("%d ledger records costing %d after the restore, want 7 priced ones", n, after)
	}
	eventually(t, 15*time.Second, "every record after the restore in the budget and the report", func() error {
		spent := second.n.Store().State().BudgetPeriod(budgetID, 0).GetSpentNanos()
		if spent != restored+after {
			return fmt.Errorf("budget spent %d, want %d restored + %d after", spent, restored, after)
		}
		rep, err := pb.NewSpendServiceClient(second.grpcConn()).SpendReport(ctx, &pb.SpendReportRequest{KeyId: keyID, By: "key"})
		if err != nil {
			return err
		}
		var requests int64
		for _, r := range rep.GetRows() {
			requests += r.GetRequests()
		}
		if requests != 5+7 {
			return fmt.Errorf("report counts %d requests, want 12", requests)
		}
		return nil
	})
}
