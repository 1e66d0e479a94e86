package node

import (
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate/tollgate/ledger"
	"github.com/tollgate/tollgate/node/proxy"
)

// BenchmarkLedgerRecorder is the node's per-request cost of recording a
// finished request: building the spend record and appending it to a real
// ledger (serial: one commit each).
func BenchmarkLedgerRecorder(b *testing.B) {
	l, err := ledger.Open(ledger.Config{Dir: b.TempDir(), NodeID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	lr := ledgerRecorder{l: l, node: "bench", log: slog.Default()}
	rec := &proxy.Record{RequestID: "req-1", KeyID: "key-1", TeamID: "team-1", Model: "gpt-4o",
		Deployment: "dep-1", Provider: "openai", Start: time.Now(), Status: 200, Attempts: 1}
	rec.Usage.PromptTokens, rec.Usage.CompletionTokens, rec.Usage.Present = 12, 250, true
	b.ReportAllocs()
	for b.Loop() {
		lr.Record(rec)
	}
}
