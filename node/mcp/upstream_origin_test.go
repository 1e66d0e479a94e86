package mcp

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// A server's headers go to its configured origin only: an upstream that
// redirects the gateway elsewhere does not get them sent there.
func TestUpstreamHeadersNotSentToAnotherOrigin(t *testing.T) {
	up := newTestUpstream(t)
	var leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Secret") != "" {
			leaked.Add(1)
		}
		r.URL.Scheme, r.URL.Host = "", ""
		http.Redirect(w, r, up.url+r.URL.String(), http.StatusTemporaryRedirect) // still answers, from elsewhere
	}))
	t.Cleanup(other.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	e := &env{t: t, store: openStore(t), upstream: up}
	e.start(Config{})
	e.apply(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{Server: &pb.McpServer{
		Name: "r", Transport: "http", Url: redirector.URL + "/mcp", Headers: map[string]string{"X-Secret": "s3cret"}}}}})
	res := e.gw.Test(t.Context(), e.store.State().McpServer("r"))
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the header was sent to another origin %d times (test: %v)", n, res)
	}
}
