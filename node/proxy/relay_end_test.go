package proxy_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/node/proxy"
)

// writeCounter is a listener whose connections count their writes: each
// is one system call of net/http's server.
type writeCounter struct {
	net.Listener
	mu     sync.Mutex
	writes int
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, l: l}, nil
}

func (l *writeCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

type countedConn struct {
	net.Conn
	l *writeCounter
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.writes++
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

// A stream whose events and end arrive from the upstream together leaves
// the gateway in one system call: headers, events and the chunked body's
// end. The relay does not flush before it returns; net/http sends the
// rest with the response's end (a flush there cost a write of its own).
func TestStreamThatArrivesWholeLeavesInOneWrite(t *testing.T) {
	t.Parallel()
	evs := append(rawEvents(10, "e"), doneEvent)
	url := rawUpstream(t, func(c *rawConn) { c.send(append(evs, "")...) })
	route := newRoute(t, "whole", dep(uniq("dep"), url, "m"))
	_, secret := newKey(t, route)
	tr := proxy.NewTransport()
	t.Cleanup(tr.CloseIdleConnections)
	rec := &recorder{ch: make(chan proxy.Record, 4)}
	h := proxy.New(proxy.Config{State: testStore(t), Transport: tr, Recorders: []proxy.Recorder{rec},
		Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wc := &writeCounter{Listener: ln}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = wc
	srv.Start()
	t.Cleanup(srv.Close)

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(chatBody(route, `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if want := strings.Join(evs, ""); string(body) != want {
		t.Fatalf("the client got %q, not the upstream's events %q", body, want)
	}
	if r := rec.next(t); r.Status != http.StatusOK {
		t.Errorf("record status %d", r.Status)
	}
	if n := wc.count(); n != 1 {
		t.Errorf("the gateway wrote the stream in %d system calls, want 1", n)
	}
}
