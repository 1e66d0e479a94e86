package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// BenchmarkValidAnswer: the check of a whole ~1.3 KB chat answer before it
// is relayed.
func BenchmarkValidAnswer(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"mock-up","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"` + strings.Repeat("x", 1000) + `"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":6,"completion_tokens":250,"total_tokens":256}}`)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if !validAnswer(data) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkNewUpstreamRequest: building the upstream request of an
// OpenAI-wire deployment (URL, headers, pooled body).
func BenchmarkNewUpstreamRequest(b *testing.B) {
	d := &raftstore.Deployment{ID: "d", Provider: routing.ProviderOpenAI, BaseURL: "http://127.0.0.1:8080/v1", Credential: "sk-x"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		body := getBuf()
		body.b = append(body.b, `{"model":"m"}`...)
		req, err := newUpstreamRequest(ctx, d, routing.EndpointChat, body)
		if err != nil {
			b.Fatal(err)
		}
		_ = req.Body.Close()
	}
}
