package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// countingWriter counts the body bytes written so far.
type countingWriter struct {
	h    http.Header
	body bytes.Buffer
}

func (c *countingWriter) Header() http.Header         { return c.h }
func (c *countingWriter) Write(p []byte) (int, error) { return c.body.Write(p) }
func (c *countingWriter) WriteHeader(int)             {}
func (c *countingWriter) Flush()                      {}

// seenAt records how much of the answer was written when the request was
// recorded.
type seenAt struct {
	w       *countingWriter
	written int
	usage   bool
}

func (s *seenAt) Record(rec *proxy.Record) { s.written, s.usage = s.w.body.Len(), rec.Usage.Present }

// TestDemoRecordedBeforeLastByte: the demo provider, like a real upstream,
// has the request recorded (ledger included) before the end of its answer
// reaches the client, with the usage it reports.
func TestDemoRecordedBeforeLastByte(t *testing.T) {
	route := newRoute(t, "demo-commit", &pb.Deployment{Id: "demo", Provider: "demo", UpstreamModel: "demo"})
	_, secret := newKey(t, route)
	for _, stream := range []bool{false, true} {
		w := &countingWriter{h: http.Header{}}
		rec := &seenAt{w: w}
		h := proxy.New(proxy.Config{State: testStore(t), Recorders: []proxy.Recorder{rec}})
		extra := []string{}
		if stream {
			extra = append(extra, `"stream":true`)
		}
		body := chatBody(route, extra...)
		req, _ := http.NewRequest(http.MethodPost, "http://gateway/v1/chat/completions", io.NopCloser(strings.NewReader(body)))
		req.Header.Set("Authorization", "Bearer "+secret)
		h.ServeHTTP(w, req)
		if !rec.usage {
			t.Errorf("stream=%v: recorded without usage", stream)
		}
		if rec.written >= w.body.Len() {
			t.Errorf("stream=%v: recorded after the whole answer was written (%d of %d bytes)", stream, rec.written, w.body.Len())
		}
		if stream && !strings.HasSuffix(w.body.String(), "data: [DONE]\n\n") {
			t.Errorf("stream ends %q", w.body.String()[max(0, w.body.Len()-40):])
		}
	}
}
