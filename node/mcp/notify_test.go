package mcp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// refuseNotifications answers status to the notifications the gateway
// forwards on a session (progress, cancelled), as a proxy or a server
// that does not take them might (it still passes them to next, so that a
// cancelled call ends), and passes everything else to next; refused
// counts the refusals.
func refuseNotifications(status int, refused *atomic.Int32, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"notifications/progress"`)) ||
				bytes.Contains(body, []byte(`"method":"notifications/cancelled"`)) {
				next.ServeHTTP(httptest.NewRecorder(), r)
				refused.Add(1)
				http.Error(w, "not here", status)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// An upstream's 4xx to a notification the gateway sends on its session
// (a cancellation, progress) has nobody to answer: it must not end the
// session, which the SDK's client did, failing every key's calls through
// the server until it was dialed again.
func TestUpstreamRefusingANotificationKeepsTheSession(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			var refused atomic.Int32
			e := &env{t: t, store: openStore(t)}
			e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler {
				return refuseNotifications(status, &refused, bothProtocols(s))
			})
			e.start(Config{})
			e.addServer("up", e.upstream.url)
			u := e.gw.upstream("up")
			sess, _ := u.session()
			if err := sess.NotifyProgress(context.Background(), &sdk.ProgressNotificationParams{ProgressToken: "t", Progress: 1}); err != nil {
				t.Fatalf("a refused notification: %v", err)
			}
			if refused.Load() != 1 {
				t.Fatalf("the upstream refused %d notifications, want 1", refused.Load())
			}
			cs := e.connect("/mcp", e.addKey("k1", []string{"up__*"}, nil), "", nil)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "up__slow"})
				errc <- err
			}()
			<-e.upstream.started
			cancel()
			<-errc
			for deadline := time.Now().Add(10 * time.Second); refused.Load() < 2; {
				if time.Now().After(deadline) {
					t.Fatal("the cancellation never reached the upstream")
				}
				time.Sleep(time.Millisecond)
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}})
			if err != nil || res.IsError {
				t.Fatalf("a call after two refused notifications: %v %v", res, err)
			}
			if now, _ := u.session(); now != sess {
				t.Errorf("the refused notifications ended the session (state %v)", e.gw.Status("up"))
			}
			if st := e.gw.Status("up"); st.GetState() != stateConnected {
				t.Errorf("after refused notifications the server is %v", st)
			}
		})
	}
}
