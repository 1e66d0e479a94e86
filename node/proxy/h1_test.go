package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter counts the connections an httptest server accepted.
type connCounter struct{ n atomic.Int64 }

func (c *connCounter) hook(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		c.n.Add(1)
	}
}

func h1Server(t *testing.T, h http.HandlerFunc, idle ...time.Duration) (*httptest.Server, *connCounter) {
	t.Helper()
	cc := &connCounter{}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = cc.hook
	if len(idle) > 0 {
		srv.Config.IdleTimeout = idle[0]
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, cc
}

func post(t *testing.T, tr http.RoundTripper, url, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, string(data), resp.Header
}

func TestH1ReusesOneConnection(t *testing.T) {
	var got []string
	var mu sync.Mutex
	srv, cc := h1Server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Host+" "+r.Header.Get("Authorization")+" "+
			r.Header.Get("Content-Length")+" "+string(b))
		mu.Unlock()
		if r.URL.Query().Get("chunked") != "" {
			w.Write([]byte("part1,")) //nolint:errcheck
			w.(http.Flusher).Flush()
			w.Write([]byte("part2")) //nolint:errcheck
			return
		}
		w.Header().Set("X-Echo", "yes")
		w.Write(b) //nolint:errcheck
	})
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	for i := range 20 {
		url := srv.URL + "/v1/x?i=1"
		if i%2 == 1 {
			url = srv.URL + "/v1/x?chunked=1"
		}
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"a":1}`))
		req.Header.Set("Authorization", "Bearer k")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := `{"a":1}`
		if i%2 == 1 {
			want = "part1,part2"
			if len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
				t.Errorf("request %d: transfer encoding %v, want chunked", i, resp.TransferEncoding)
			}
		} else if resp.Header.Get("X-Echo") != "yes" {
			t.Errorf("request %d: headers %v", i, resp.Header)
		}
		if resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("request %d: %d %q, want 200 %q", i, resp.StatusCode, body, want)
		}
	}
	if n := cc.n.Load(); n != 1 {
		t.Errorf("%d connections for 20 sequential requests, want 1", n)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if want := "POST /v1/x?i=1 " + host + " Bearer k 7 {\"a\":1}"; got[0] != want {
		t.Errorf("server saw %q, want %q", got[0], want)
	}
}

// A server that closes idle connections (keep-alive timeout, restart)
// costs no request: the closed connection is found before it is used.
func TestH1ServerClosedIdle(t *testing.T) {
	srv, cc := h1Server(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }, 20*time.Millisecond) //nolint:errcheck
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	for i := range 5 {
		if code, body, _ := post(t, tr, srv.URL, "x"); code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		waitIdleClosed(t, tr, srv.URL) // the server closes the idle connection
	}
	if n := cc.n.Load(); n != 5 {
		t.Errorf("%d connections, want 5 (one per request after each idle close)", n)
	}
	// Closed by reset rather than FIN: the same.
	srv2, cc2 := h1Server(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }) //nolint:errcheck
	for i := range 3 {
		if code, body, _ := post(t, tr, srv2.URL, "x"); code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		srv2.CloseClientConnections() // RST or FIN, whichever the server's close gives
		waitIdleClosed(t, tr, srv2.URL)
	}
	if n := cc2.n.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

// rawServer answers each connection with fn, which reads the request itself.
func rawServer(t *testing.T, fn func(c net.Conn, br *bufio.Reader)) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				fn(c, bufio.NewReader(c))
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &conns
}

// readRequest reads one request and its body, or returns false.
func readRequest(br *bufio.Reader) (*http.Request, bool) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, false
	}
	_, _ = io.Copy(io.Discard, req.Body)
	return req, true
}

func TestH1ConnectionCloseAndExtraBytes(t *testing.T) {
	url, conns := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, ok := readRequest(br)
			if !ok {
				return
			}
			switch req.URL.Path {
			case "/close":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok") //nolint:errcheck
				return
			case "/extra": // a second, unasked answer after the first
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") //nolint:errcheck
			case "/continue":
				io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") //nolint:errcheck
			default:
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") //nolint:errcheck
			}
		}
	})
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	for _, path := range []string{"/close", "/close", "/plain", "/extra", "/plain", "/continue", "/plain"} {
		if code, body, _ := post(t, tr, url+path, "x"); code != 200 || body != "ok" {
			t.Fatalf("%s: %d %q", path, code, body)
		}
	}
	// close, close: one each; plain: new; extra reuses it but leaves it
	// unclean; plain: new; continue and plain reuse that one.
	if n := conns.Load(); n != 4 {
		t.Errorf("%d connections, want 4", n)
	}
}

func TestH1HeaderLimitAndBrokenAnswers(t *testing.T) {
	url, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		req, ok := readRequest(br)
		if !ok {
			return
		}
		switch req.URL.Path {
		case "/huge":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: ") //nolint:errcheck
			chunk := strings.Repeat("a", 64<<10)
			for range 20 {
				if _, err := io.WriteString(c, chunk); err != nil {
					return
				}
			}
		case "/garbage":
			io.WriteString(c, "SMTP ready\r\n\r\n") //nolint:errcheck
		case "/cut":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc") //nolint:errcheck
		case "/switch":
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\n\r\n") //nolint:errcheck
		}
	})
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	for _, path := range []string{"/huge", "/garbage", "/switch", "/silent"} {
		req, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: status %d, want an error", path, resp.StatusCode)
			continue
		}
		if path == "/huge" && !errors.Is(err, errUpstreamHeaderTooLarge) {
			t.Errorf("%s: %v, want %v", path, err, errUpstreamHeaderTooLarge)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/cut", strings.NewReader("x"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut body: %v, want unexpected EOF", err)
	}
	resp.Body.Close()
}

// Cancelling the request's context unblocks a wait for the answer and for
// its body, and the connection is closed, not reused.
func TestH1ContextCancel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var closed atomic.Int64
	url, conns := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, ok := readRequest(br)
			if !ok {
				closed.Add(1)
				return
			}
			if req.URL.Path == "/body" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nstart") //nolint:errcheck
			}
			if req.URL.Path != "/ok" {
				go func() { <-release; c.Close() }()
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") //nolint:errcheck
		}
	})
	tr := NewTransport()
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/hang", strings.NewReader("x"))
	start := time.Now()
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang: %v, want the context's error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("hang returned after %v", d)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx2, http.MethodPost, url+"/body", strings.NewReader("x"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "start" {
		t.Fatalf("body start %q %v", buf, err)
	}
	time.AfterFunc(50*time.Millisecond, cancel2)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("body read after cancel: no error")
	}
	resp.Body.Close()

	// Neither connection is reused.
	if code, body, _ := post(t, tr, url+"/ok", "x"); code != 200 || body != "ok" {
		t.Fatalf("ok: %d %q", code, body)
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
	// A body closed before its end closes the connection too.
	req, _ = http.NewRequest(http.MethodPost, url+"/body", strings.NewReader("x"))
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(buf); err == nil {
		t.Error("read after close: no error")
	}
}

func TestH1RefusesHeaderInjection(t *testing.T) {
	srv, cc := h1Server(t, func(w http.ResponseWriter, r *http.Request) {})
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	for _, h := range [][2]string{{"X-A", "v\r\nX-Injected: 1"}, {"X-A", "v\nX"}, {"Bad Name", "v"}, {"X-A", "nul\x00"}} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
		req.Header[h[0]] = []string{h[1]}
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
			t.Errorf("header %q: %q sent", h[0], h[1])
		}
	}
	if n := cc.n.Load(); n != 0 {
		t.Errorf("%d connections opened for refused requests", n)
	}
}

// tlsServer is h1Server over TLS (HTTP/1.1 only, as httptest's default),
// with the roots a client needs to trust it.
func tlsServer(t *testing.T, h http.HandlerFunc, h2 bool) (*httptest.Server, *connCounter, *x509.CertPool) {
	t.Helper()
	cc := &connCounter{}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = cc.hook
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, cc, srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
}

// HTTPS upstreams go through the HTTP/1.1 client over TLS: one connection
// for a run of requests (resumed, verified against the given roots), a
// fresh one after the server closes it while idle; SetHTTP2 sends them
// through net/http.
func TestH1OverTLS(t *testing.T) {
	srv, cc, roots := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write([]byte(r.Proto + " " + r.Host + " " + string(b))) //nolint:errcheck
	}, false)
	tr := NewTransport()
	tr.SetTLSClientConfig(&tls.Config{RootCAs: roots})
	defer tr.CloseIdleConnections()
	for i := range 10 {
		if code, body, _ := post(t, tr, srv.URL+"/v1/x", "ping"); code != 200 || body != "HTTP/1.1 "+srv.Listener.Addr().String()+" ping" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	n := 0
	tr.tlsPools.Range(func(_, _ any) bool { n++; return true })
	if n != 1 || cc.n.Load() != 1 {
		t.Errorf("%d TLS pools and %d connections for 10 requests; want 1 and 1", n, cc.n.Load())
	}

	// The server closes the idle connection (a close_notify and a FIN):
	// the next request sees it gone and dials again.
	srv.CloseClientConnections()
	waitIdleClosed(t, tr, srv.URL)
	if code, body, _ := post(t, tr, srv.URL+"/v1/x", "again"); code != 200 || !strings.HasSuffix(body, " again") {
		t.Fatalf("after the server closed: %d %q", code, body)
	}
	if cc.n.Load() != 2 {
		t.Errorf("%d connections; want 2", cc.n.Load())
	}

	// Not trusted: the request fails with the certificate error.
	plain := NewTransport()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/x", strings.NewReader("x"))
	if _, err := plain.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted server: %v", err)
	}

	// SetHTTP2: net/http, which takes HTTP/2 where the server offers it.
	srv2, _, roots2 := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Proto)) //nolint:errcheck
	}, true)
	h2 := NewTransport()
	h2.SetTLSClientConfig(&tls.Config{RootCAs: roots2})
	h2.SetHTTP2(true)
	defer h2.CloseIdleConnections()
	if code, body, _ := post(t, h2, srv2.URL, "x"); code != 200 || body != "HTTP/2.0" {
		t.Errorf("SetHTTP2: %d %q; want HTTP/2.0", code, body)
	}
	// Without it, the same server is spoken to in HTTP/1.1.
	h1 := NewTransport()
	h1.SetTLSClientConfig(&tls.Config{RootCAs: roots2})
	defer h1.CloseIdleConnections()
	if code, body, _ := post(t, h1, srv2.URL, "x"); code != 200 || body != "HTTP/1.1" {
		t.Errorf("default: %d %q; want HTTP/1.1", code, body)
	}
}

// A TLS handshake that never completes fails within the request's
// context, and a server that is not TLS at all fails at once.
func TestH1TLSHandshakeFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent: never answers the ClientHello
		}
	}()
	tr := NewTransport()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+ln.Addr().String()+"/v1/x", strings.NewReader("x"))
	start := time.Now()
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a silent server answered")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the handshake with a silent server took %v", d)
	}

	plainSrv, _ := h1Server(t, func(w http.ResponseWriter, r *http.Request) {})
	req, _ = http.NewRequest(http.MethodPost, strings.Replace(plainSrv.URL, "http://", "https://", 1), strings.NewReader("x"))
	if _, err := tr.RoundTrip(req); err == nil {
		t.Error("a plain-HTTP server passed a TLS handshake")
	}
}

// Idle connections are closed after the idle timeout, and the pool keeps at
// most maxIdlePerHost.
func TestH1IdlePruneAndCap(t *testing.T) {
	var active, arrived atomic.Int64
	all := make(chan struct{}) // the 8 requests are in: 8 connections
	cc := &connCounter{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == 8 {
			close(all)
		}
		select {
		case <-all:
		case <-r.Context().Done():
		}
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		cc.hook(c, s)
		switch s {
		case http.StateNew:
			active.Add(1)
		case http.StateClosed, http.StateHijacked:
			active.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr := NewTransport()
	tr.maxIdlePerHost = 3
	tr.idleTimeout = 200 * time.Millisecond
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(t, tr, srv.URL, "x")
		}()
	}
	wg.Wait()
	waitFor(t, func() bool { return active.Load() == 3 }, "3 idle connections kept of 8")
	waitFor(t, func() bool { return active.Load() == 0 }, "idle connections closed after the idle timeout")
	post(t, tr, srv.URL, "x")
	if n := cc.n.Load(); n != 9 {
		t.Errorf("%d connections, want 9", n)
	}
}

// waitIdleClosed waits until the liveness peek sees every idle connection
// of tr to url's host closed by the server.
func waitIdleClosed(t *testing.T, tr *Transport, url string) {
	t.Helper()
	pools, host := &tr.pools, strings.TrimPrefix(url, "http://")
	if h, ok := strings.CutPrefix(url, "https://"); ok {
		pools, host = &tr.tlsPools, h
	}
	waitFor(t, func() bool {
		v, ok := pools.Load(host)
		if !ok {
			return true
		}
		p := v.(*h1Pool)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.idle {
			if c.alive() {
				return false
			}
		}
		return true
	}, "the idle connections seen closed")
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestH1Concurrent(t *testing.T) {
	srv, cc := h1Server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b) //nolint:errcheck
	})
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				want := strings.Repeat(string(rune('a'+g)), 100+i)
				if code, body, _ := post(t, tr, srv.URL, want); code != 200 || body != want {
					t.Errorf("goroutine %d request %d: %d, %d bytes", g, i, code, len(body))
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := cc.n.Load(); n > 8 {
		t.Errorf("%d connections for 8 concurrent clients", n)
	}
}

// A server that answers (413) before reading a large body and closes: its
// answer is relayed, not lost to the write's broken pipe.
func TestH1EarlyAnswerBeforeBodyRead(t *testing.T) {
	srv, _ := h1Server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(strings.Repeat("x", 8<<20)))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("the server's 413 was lost: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "too large") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}

// Close while another goroutine reads the body neither panics nor races.
func TestH1CloseDuringRead(t *testing.T) {
	srv, _ := h1Server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	done, reading := make(chan any), make(chan struct{})
	go func() {
		defer func() { done <- recover() }()
		close(reading)
		if _, err := resp.Body.Read(make([]byte, 10)); err == nil {
			t.Error("read of a closed body: no error")
		}
	}()
	<-reading // the Read is starting, or blocked: the Close may come before it, or during it
	resp.Body.Close()
	if p := <-done; p != nil {
		t.Fatalf("Read panicked after a concurrent Close: %v", p)
	}
}

// A caller's Connection: close header is honoured like req.Close.
func TestH1ConnectionCloseHeader(t *testing.T) {
	url, conns := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, ok := readRequest(br)
			if !ok {
				return
			}
			if !req.Close {
				t.Error("the request did not ask to close the connection")
			}
			// Kept open: only the client's own close makes a new connection.
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") //nolint:errcheck
		}
	})
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
		req.Header.Set("Connection", "keep-alive, Close")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.ReadAll(resp.Body) //nolint:errcheck
		resp.Body.Close()
		if req.Close {
			t.Fatal("the caller's request was changed")
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (one per request)", n)
	}
}

// holdConn gathers a server's writes while hold is set and sends them in
// one write: TLS records that arrive in one TCP segment.
type holdConn struct {
	net.Conn
	hold bool
	buf  []byte
}

func (h *holdConn) Write(p []byte) (int, error) {
	if h.hold {
		h.buf = append(h.buf, p...)
		return len(p), nil
	}
	return h.Conn.Write(p)
}

func (h *holdConn) flush() {
	h.hold = false
	_ = h.Conn.SetWriteDeadline(time.Time{}) // tls.Conn.CloseWrite sets one in the past
	_, _ = h.Conn.Write(h.buf)
	h.buf = nil
}

// rawTLSServer serves TLS (HTTP/1.1 by ALPN) with serve on each
// connection, and returns its URL and a transport that trusts it.
func rawTLSServer(t *testing.T, serve func(c net.Conn, hc *holdConn, tc *tls.Conn)) (string, *Transport) {
	t.Helper()
	hs := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(hs.Close)
	cfg := hs.TLS.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hc := &holdConn{Conn: c}
			go serve(c, hc, tls.Server(hc, cfg))
		}
	}()
	tr := NewTransport()
	tr.SetTLSClientConfig(&tls.Config{RootCAs: hs.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	t.Cleanup(tr.CloseIdleConnections)
	return "https://" + ln.Addr().String(), tr
}

// Over TLS as over plain HTTP, an unasked answer that came in with the
// asked one (in its own record, in the same segment) keeps the connection
// out of the pool: the next request must not read it as its answer.
func TestH1TLSExtraRecordNotReused(t *testing.T) {
	url, tr := rawTLSServer(t, func(c net.Conn, hc *holdConn, tc *tls.Conn) {
		defer c.Close()
		br := bufio.NewReader(tc)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			hc.hold = true
			_, _ = tc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			if req.URL.Path == "/extra" {
				_, _ = tc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nSTALE"))
			}
			hc.flush()
		}
	})
	for _, path := range []string{"/extra", "/plain", "/plain"} {
		if code, body, _ := post(t, tr, url+path, "x"); code != 200 || body != "ok" {
			t.Fatalf("%s: %d %q; want 200 \"ok\"", path, code, body)
		}
	}
}

// A server that ends keep-alive with a close_notify right after an answer
// (in the same segment) and closes the socket later: the connection is
// not reused, so the next request does not fail on it.
func TestH1TLSCloseNotifyWithAnswer(t *testing.T) {
	testDone := make(chan struct{})
	t.Cleanup(func() { close(testDone) })
	url, tr := rawTLSServer(t, func(c net.Conn, hc *holdConn, tc *tls.Conn) {
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(tc))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		hc.hold = true
		_, _ = tc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		_ = tc.CloseWrite() // close_notify
		hc.flush()
		<-testDone // the FIN comes much later: when the test is over
	})
	for i := range 3 {
		if code, body, _ := post(t, tr, url+"/v1/x", "x"); code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
}
