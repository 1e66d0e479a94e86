package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/ledger"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// ledgerRecorder appends every request to a real Pebble ledger, as the
// node does (node/spend.go).
type ledgerRecorder struct{ l *ledger.Ledger }

func (r ledgerRecorder) Record(rec *proxy.Record) {
	_ = r.l.Append(&pb.SpendRecord{UnixNanos: rec.Start.UnixNano(), RequestId: rec.RequestID, Node: "bench",
		KeyId: rec.KeyID, Model: rec.Model, Deployment: rec.Deployment, PromptTokens: rec.Usage.PromptTokens,
		CompletionTokens: rec.Usage.CompletionTokens, Status: int32(rec.Status)}, nil)
}

// BenchmarkHandlerChatLedger compares the gateway's own cost for a
// non-streaming completion without a ledger and with every request
// appended to Pebble before the answer is written (group commit, no fsync
// wait). Serial, so every append is its own commit: the worst case.
func BenchmarkHandlerChatLedger(b *testing.B) {
	resp := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"mock-up","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"` + strings.Repeat("x", 1000) + `"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":6,"completion_tokens":250,"total_tokens":256}}`
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			route := newRoute(b, "lbench", dep(uniq("dep"), "http://upstream.invalid", "mock-up"))
			_, secret := newKey(b, route)
			cfg := proxy.Config{State: testStore(b), Transport: newCannedTransport("application/json", []byte(resp))}
			if on {
				l, err := ledger.Open(ledger.Config{Dir: b.TempDir(), NodeID: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = l.Close() })
				cfg.Recorders = []proxy.Recorder{ledgerRecorder{l}}
			}
			h := proxy.New(cfg)
			body := []byte(chatBody(route))
			rd := bytes.NewReader(body)
			req, _ := http.NewRequest(http.MethodPost, "http://gateway/v1/chat/completions", rd)
			req.Header.Set("Authorization", "Bearer "+secret)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				req.Body = io.NopCloser(rd)
				req.ContentLength = int64(len(body))
				clear(w.h)
				h.ServeHTTP(w, req)
			}
		})
	}
}
