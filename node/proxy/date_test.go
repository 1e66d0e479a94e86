package proxy_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
)

// TestAnswersAndStreamsCarryTheCurrentDate: the Date header the gateway
// formats once a second (instead of net/http per response) is a valid
// HTTP date of now, on whole answers and on streams.
func TestAnswersAndStreamsCarryTheCurrentDate(t *testing.T) {
	_, url := startMock(t, mock.Options{Chunks: 3})
	route := newRoute(t, "dated", dep(uniq("dep"), url, "mock-up"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	for _, extra := range [][]string{nil, {`"stream":true`}} {
		before := time.Now().Truncate(time.Second)
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(route, extra...)))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := g.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		after := time.Now()
		date, err := http.ParseTime(resp.Header.Get("Date"))
		if resp.StatusCode != 200 || err != nil || len(resp.Header.Values("Date")) != 1 || date.Before(before) || date.After(after) {
			t.Errorf("stream %v: status %d, Date %q (%v), want one between %v and %v", extra != nil, resp.StatusCode, resp.Header.Values("Date"), err, before, after)
		}
	}
}
