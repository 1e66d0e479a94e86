package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Over TLS the wait for an answer only peeks at the socket (awaitTLSFD):
// an upstream that answers while the exchange waits is read whole, on a
// connection that is then reused, and a request cancelled while it waits
// ends with its context's error, its connection not reused.
func TestTLSExchangeWaitsForALateAnswerAndForItsCancel(t *testing.T) {
	got := make(chan struct{}, 4)
	release := make(chan struct{}, 4)
	srv, cc, roots := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- struct{}{}
		if string(b) == "cancel" { // answers never: the client gives up
			<-r.Context().Done()
			return
		}
		select {
		case <-release:
			w.Write([]byte("late " + string(b))) //nolint:errcheck
		case <-r.Context().Done():
		}
	}, false)
	tr := NewTransport()
	tr.SetTLSClientConfig(&tls.Config{RootCAs: roots})
	defer tr.CloseIdleConnections()

	for i := range 2 {
		type answer struct {
			code int
			body string
		}
		done := make(chan answer, 1)
		go func() {
			code, body, _ := post(t, tr, srv.URL+"/v1/x", "ping")
			done <- answer{code, body}
		}()
		<-got // the request is read: the client waits for the answer
		release <- struct{}{}
		if a := <-done; a.code != 200 || a.body != "late ping" {
			t.Fatalf("late answer %d: %d %q", i, a.code, a.body)
		}
	}
	if n := cc.n.Load(); n != 1 {
		t.Errorf("%d connections for two late answers, want 1 (reused)", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/x", strings.NewReader("cancel"))
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-got
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a request cancelled while it waited: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a request cancelled while it waited for its answer over TLS did not return")
	}
	release <- struct{}{}
	if code, body, _ := post(t, tr, srv.URL+"/v1/x", "after"); code != 200 || body != "late after" {
		t.Fatalf("after the cancel: %d %q", code, body)
	}
}
