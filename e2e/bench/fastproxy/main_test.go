package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startProxy serves the proxy on a loopback port in front of upstream and
// returns its base URL and a client of its own.
func startProxy(t *testing.T, upstream string) (string, *http.Client) {
	t.Helper()
	host, err := upstreamHost(upstream)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(host)
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown below
	// The timeout only keeps a broken proxy from hanging the test.
	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		if err := srv.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	return "http://" + ln.Addr().String(), client
}

// countConns counts the connections the upstream accepted.
func countConns(up *httptest.Server) *atomic.Int32 {
	var n atomic.Int32
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	return &n
}

func TestRelaysRequestAndAnswerOnKeptAliveConnections(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Seen", r.Header.Get("Authorization"))
		w.WriteHeader(201)
		io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+string(body))
	}))
	conns := countConns(up)
	up.Start()
	defer up.Close()
	base, client := startProxy(t, up.URL)
	var reused int
	for i := range 3 {
		trace := &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) {
			if c.Reused {
				reused++
			}
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", base+"/v1/chat/completions?x=1", strings.NewReader(`{"n":1}`))
		req.Header.Set("Authorization", "Bearer k")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 || string(body) != `POST /v1/chat/completions?x=1 {"n":1}` ||
			resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Seen") != "Bearer k" {
			t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
	}
	if reused != 2 || conns.Load() != 1 {
		t.Errorf("client connections reused %d times (want 2), upstream connections %d (want 1)", reused, conns.Load())
	}
}

// TestRelaysEachStreamChunkBeforeTheNextIsSent: the upstream writes a
// chunk only after the client has read the one before through the proxy,
// so a proxy that held chunks back would never finish.
func TestRelaysEachStreamChunkBeforeTheNextIsSent(t *testing.T) {
	const chunks = 5
	read, done := make(chan struct{}), make(chan struct{})
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range chunks {
			io.WriteString(w, "data: "+string(rune('a'+i))+"\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-read:
			case <-r.Context().Done():
				return
			case <-done: // the test failed: let up.Close return
				return
			}
		}
	}))
	conns := countConns(up)
	up.Start()
	defer up.Close()
	defer close(done)
	base, client := startProxy(t, up.URL)
	for range 2 { // the second stream reuses the upstream connection the first gave back
		resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("content type %q", resp.Header.Get("Content-Type"))
		}
		br := bufio.NewReader(resp.Body)
		for i := range chunks {
			line, err := br.ReadString('\n')
			if err != nil || line != "data: "+string(rune('a'+i))+"\n" {
				t.Fatalf("chunk %d: %q %v", i, line, err)
			}
			br.ReadString('\n')
			read <- struct{}{}
		}
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Errorf("after the last chunk: %q %v", rest, err)
		}
		resp.Body.Close()
	}
	if conns.Load() != 1 {
		t.Errorf("upstream connections %d, want 1", conns.Load())
	}
}

func TestAnswersBadGatewayInJSONWhenTheUpstreamIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base, client := startProxy(t, "http://"+addr)
	resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || resp.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(string(body), `{"error":{"message":"fastproxy: upstream unreachable"`) {
		t.Errorf("%d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if strings.Contains(string(body), addr) {
		t.Errorf("the error names the upstream: %s", body)
	}
}

func TestUpstreamMustBeAPlainHTTPHost(t *testing.T) {
	for in, want := range map[string]string{"http://127.0.0.1:4000": "127.0.0.1:4000", "http://127.0.0.1:4000/": "127.0.0.1:4000"} {
		if got, err := upstreamHost(in); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	for _, in := range []string{"", "127.0.0.1:4000", "https://127.0.0.1:4000", "http://", "http://127.0.0.1:4000/v1"} {
		if _, err := upstreamHost(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
