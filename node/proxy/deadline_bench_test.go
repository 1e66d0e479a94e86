package proxy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/raftstore"
)

// BenchmarkAttemptDeadline: an attempt's clock over its whole life as the
// request path lives it: the request's context made (as net/http makes
// one per request), the attempt's timeout armed, the upstream client's
// interrupt registered on the attempt's context and released, the timer
// stopped, the attempt's context and the request's ended.
func BenchmarkAttemptDeadline(b *testing.B) {
	h := &Handler{cfg: Config{UpstreamTimeout: 10 * time.Minute}}
	d := &raftstore.Deployment{ID: "d"}
	base, _ := http.NewRequest(http.MethodPost, "http://gateway/v1/chat/completions", nil)
	b.ReportAllocs()
	for b.Loop() {
		parent, end := context.WithCancel(context.Background())
		r := base.WithContext(parent)
		rec := &Record{}
		ctx, _ := h.deadline(r, rec, d)
		stop := afterFunc(ctx, func() {})
		stop.stop()
		if !started(ctx.timer, &ctx.timedOut) {
			b.Fatal("timed out")
		}
		ctx.end()
		end()
	}
}
