package mock

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestStatsKeepTheLastTraceparent(t *testing.T) {
	s := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, h := range []string{tp, ""} { // a request without one keeps it
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer k")
		if h != "" {
			req.Header.Set("Traceparent", h)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := s.Stats().LastTraceparent; got != tp {
		t.Fatalf("LastTraceparent %q, want %q", got, tp)
	}
	s.Reset()
	if got := s.Stats().LastTraceparent; got != "" {
		t.Fatalf("after Reset: %q", got)
	}
}
