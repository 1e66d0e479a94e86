package proxy

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkTransportTLS: one upstream round trip over loopback TLS (a 1 KB
// JSON answer), through net/http as the gateway used it for HTTPS (HTTP/2
// where offered, else HTTP/1.1) and through the gateway's own HTTP/1.1
// client. Connections are reused; the server's cost is included.
func BenchmarkTransportTLS(b *testing.B) {
	answer := []byte(`{"id":"x","choices":[{"message":{"content":"` + strings.Repeat("x", 1000) + `"}}]}`)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	body := strings.Repeat("y", 500)
	for _, c := range []struct {
		name string
		h2   bool
		own  bool
	}{{"nethttp-h1", false, false}, {"nethttp-h2", true, false}, {"own-h1", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewUnstartedServer(handler)
			srv.EnableHTTP2 = c.h2
			srv.StartTLS()
			defer srv.Close()
			roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			tr := NewTransport()
			tr.SetTLSClientConfig(&tls.Config{RootCAs: roots})
			tr.http2 = !c.own
			defer tr.CloseIdleConnections()
			run := func() {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			run()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					run()
				}
			})
		})
	}
}
