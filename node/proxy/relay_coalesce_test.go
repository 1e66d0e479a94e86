package proxy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/node/proxy"
)

// The relay's writes and flushes, seen from the client's side, against an
// upstream on a real socket whose TCP writes the test controls.

// rawUpstream answers every request with an event stream written by
// script on a real socket.
func rawUpstream(t testing.TB, script func(c *rawConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serveRaw(conn, script)
		}
	}()
	return "http://" + ln.Addr().String()
}

// rawConn is the upstream's side of one answer. Each call of send is ONE
// TCP write of the given events, each in a chunk of its own (as a server
// that flushes per event frames them); an empty event is the chunked
// body's end. raw writes bytes as they are. gone is closed when the
// gateway closed the connection.
type rawConn struct {
	conn net.Conn
	head string
	gone chan struct{}
}

func (c *rawConn) send(events ...string) {
	b := []byte(c.head)
	c.head = ""
	for _, ev := range events {
		b = fmt.Appendf(b, "%x\r\n%s\r\n", len(ev), ev)
	}
	_, _ = c.conn.Write(b)
}

func (c *rawConn) raw(s string) { _, _ = c.conn.Write([]byte(s)) }

func serveRaw(conn net.Conn, script func(c *rawConn)) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	c := &rawConn{conn: conn, gone: make(chan struct{}),
		head: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"}
	go func() { _, _ = io.Copy(io.Discard, br); close(c.gone) }()
	script(c)
}

// streamWriter is the client's side of a stream served by the handler
// directly: it counts writes and flushes, and can hand the test what the
// client has at each flush, or fail every write.
type streamWriter struct {
	h       http.Header
	mu      sync.Mutex
	code    int
	body    bytes.Buffer
	writes  int
	flushes int
	flushed chan string // if set: the body so far, at every flush
	fail    error       // if set: every write fails with it
}

func newStreamWriter() *streamWriter { return &streamWriter{h: http.Header{}} }

func (s *streamWriter) Header() http.Header { return s.h }
func (s *streamWriter) WriteHeader(code int) {
	s.mu.Lock()
	s.code = code
	s.mu.Unlock()
}

func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	s.writes++
	return s.body.Write(p)
}

func (s *streamWriter) Flush() {
	s.mu.Lock()
	s.flushes++
	body := s.body.String()
	s.mu.Unlock()
	if s.flushed != nil {
		s.flushed <- body
	}
}

// SetReadDeadline stands for net/http's, which the body read deadline sets.
func (s *streamWriter) SetReadDeadline(time.Time) error { return nil }

// serveRawStream serves one streamed chat request, through the gateway's
// own upstream client, from the upstream at url to w, and returns its
// record. A stream the gateway aborted is not a test failure.
func serveRawStream(t *testing.T, url string, w http.ResponseWriter) proxy.Record {
	t.Helper()
	route := newRoute(t, "raw", dep(uniq("dep"), url, "m"))
	_, secret := newKey(t, route)
	rec := &recorder{ch: make(chan proxy.Record, 4)}
	tr := proxy.NewTransport()
	t.Cleanup(tr.CloseIdleConnections)
	h := proxy.New(proxy.Config{State: testStore(t), Transport: tr, Recorders: []proxy.Recorder{rec},
		Logger: slog.New(slog.DiscardHandler)})
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(chatBody(route, `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+secret)
	func() {
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				panic(p)
			}
		}()
		h.ServeHTTP(w, req)
	}()
	return rec.next(t)
}

// rawEvents is n chat chunks, each a whole event ("data: {...}\n\n").
func rawEvents(n int, content string) []string {
	evs := make([]string, n)
	for i := range evs {
		evs[i] = fmt.Sprintf("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s%d\"}}]}\n\n", content, i)
	}
	return evs
}

const doneEvent = "data: [DONE]\n\n"

// Events that one upstream read brings go to the client in one write and
// one flush before the relay waits on the upstream again: 30 events
// (2 KiB) in one write and one flush, 110 events
// (7.5 KiB: more than net/http's 4 KiB connection buffer) in one flush,
// written in two pieces of at most 4 KiB — byte for byte as the upstream
// sent them.
func TestStreamEventsOfOneUpstreamReadLeaveInOneFlush(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		events    int
		maxWrites int
	}{{30, 1}, {110, 2}} {
		t.Run(fmt.Sprint(tc.events), func(t *testing.T) {
			t.Parallel()
			evs := append(rawEvents(tc.events, "w"), doneEvent)
			gate := make(chan struct{})
			url := rawUpstream(t, func(c *rawConn) {
				c.send(evs...)
				select { // the end comes later, on its own
				case <-gate:
				case <-c.gone:
					return
				}
				c.send("")
			})
			w := newStreamWriter()
			w.flushed = make(chan string, 1)
			done := make(chan proxy.Record, 1)
			go func() { done <- serveRawStream(t, url, w) }()
			nextFlush(t, w.flushed)
			gate <- struct{}{}
			rec := <-done
			if want := strings.Join(evs, ""); w.body.String() != want {
				t.Fatalf("the client got %d bytes, not the upstream's %d:\n%s", w.body.Len(), len(want), w.body.String())
			}
			if w.flushes != 1 || w.writes > tc.maxWrites {
				t.Errorf("%d events of one TCP write left in %d writes and %d flushes, want at most %d and 1",
					len(evs), w.writes, w.flushes, tc.maxWrites)
			}
			if rec.Status != http.StatusOK {
				t.Errorf("record status %d", rec.Status)
			}
		})
	}
}

// An upstream that sends its next event only once the client has the
// previous one: each event reaches the client, whole and alone, before the
// next leaves the upstream (the first token included).
func TestStreamPacedEventsEachReachTheClientBeforeTheNext(t *testing.T) {
	t.Parallel()
	evs := rawEvents(5, "p")
	gate := make(chan struct{})
	url := rawUpstream(t, func(c *rawConn) {
		for _, ev := range evs {
			c.send(ev)
			select {
			case <-gate:
			case <-c.gone:
				return
			}
		}
		c.send(doneEvent, "")
	})
	w := newStreamWriter()
	w.flushed = make(chan string)
	done := make(chan proxy.Record, 1)
	go func() { done <- serveRawStream(t, url, w) }()
	for i := range evs {
		if got, want := nextFlush(t, w.flushed), strings.Join(evs[:i+1], ""); got != want {
			t.Fatalf("at flush %d the client has %q, want %q", i, got, want)
		}
		gate <- struct{}{}
	}
	// [DONE] came with the stream's end: it leaves with the response's
	// end, as the handler returns, not in a flush of its own.
	select {
	case got := <-w.flushed:
		t.Fatalf("[DONE] came with the stream's end and was flushed on its own (the client has %q)", got)
	case rec := <-done:
		if rec.Status != http.StatusOK {
			t.Errorf("record status %d", rec.Status)
		}
	}
	if got := w.body.String(); got != strings.Join(evs, "")+doneEvent {
		t.Fatalf("the client has %q at the end", got)
	}
}

// An event split across two upstream reads is never written in part: the
// client has the events before it, and then the whole of it.
func TestStreamEventSplitAcrossReadsIsWrittenWhole(t *testing.T) {
	t.Parallel()
	evs := rawEvents(3, "s")
	half := len(evs[1]) / 2
	gate := make(chan struct{})
	url := rawUpstream(t, func(c *rawConn) {
		c.send(evs[0], evs[1][:half])
		select {
		case <-gate:
		case <-c.gone:
			return
		}
		c.send(evs[1][half:], evs[2], doneEvent, "")
	})
	w := newStreamWriter()
	w.flushed = make(chan string, 8)
	rec := make(chan proxy.Record, 1)
	go func() { rec <- serveRawStream(t, url, w) }()
	if got := <-w.flushed; got != evs[0] {
		t.Fatalf("before the rest of event 1 arrived the client has %q, want %q", got, evs[0])
	}
	gate <- struct{}{}
	if r := <-rec; r.Status != http.StatusOK {
		t.Errorf("record status %d", r.Status)
	}
	if want := strings.Join(evs, "") + doneEvent; w.body.String() != want {
		t.Fatalf("the client got %q, want %q", w.body.String(), want)
	}
}

// Events longer than the client writer's 4 KiB and than the 16 KiB read
// buffers go through byte for byte, between short ones.
func TestStreamLongEventsRelayedExactly(t *testing.T) {
	t.Parallel()
	evs := []string{rawEvents(1, "a")[0], rawEvents(1, strings.Repeat("x", 5000))[0],
		rawEvents(1, strings.Repeat("y", 40000))[0], rawEvents(1, "b")[0], doneEvent}
	url := rawUpstream(t, func(c *rawConn) { c.send(append(evs, "")...) })
	w := newStreamWriter()
	if rec := serveRawStream(t, url, w); rec.Status != http.StatusOK {
		t.Errorf("record status %d", rec.Status)
	}
	if want := strings.Join(evs, ""); w.body.String() != want {
		t.Fatalf("the client got %d bytes, not the upstream's %d", w.body.Len(), len(want))
	}
}

// A client that went away is found when its events are flushed: the
// stream is recorded as the client's cancellation (499), not as an
// upstream failure, and the gateway does not wait on the upstream's next
// event to notice (this upstream sends none until the gateway hangs up).
func TestStreamClientGoneAtFlushIsRecordedAsCancelled(t *testing.T) {
	t.Parallel()
	url := rawUpstream(t, func(c *rawConn) {
		c.send(rawEvents(2, "g")...)
		<-c.gone
	})
	w := newStreamWriter()
	w.fail = errors.New("connection reset by client")
	if rec := serveRawStream(t, url, w); rec.Status != 499 || !rec.Stream {
		t.Errorf("record %+v, want status 499", rec)
	}
}

// An upstream that breaks its chunked framing mid-stream: the events
// before it reach the client, no byte of the garbage does, and the stream
// is recorded as a 502 (the client's connection is aborted).
func TestStreamUpstreamWithBadFramingMidStream(t *testing.T) {
	t.Parallel()
	evs := rawEvents(2, "f")
	url := rawUpstream(t, func(c *rawConn) {
		c.send(evs[0])
		c.raw("zz\r\n" + evs[1]) // not a chunk size
	})
	w := newStreamWriter()
	rec := serveRawStream(t, url, w)
	if rec.Status != http.StatusBadGateway {
		t.Errorf("record status %d, want 502", rec.Status)
	}
	if got := w.body.String(); got != evs[0] {
		t.Errorf("the client got %q, want only %q", got, evs[0])
	}
}

// noFlush hides the Flush of the writer it wraps, as a middleware that
// does not pass it on would.
type noFlush struct{ w *streamWriter }

func (n noFlush) Header() http.Header         { return n.w.Header() }
func (n noFlush) Write(p []byte) (int, error) { return n.w.Write(p) }
func (n noFlush) WriteHeader(code int)        { n.w.WriteHeader(code) }

// A client's writer that cannot flush still gets the whole stream: what
// the relay gathers is handed to it all the same.
func TestStreamToAWriterThatCannotFlushIsWhole(t *testing.T) {
	t.Parallel()
	evs := append(rawEvents(3, "n"), doneEvent)
	url := rawUpstream(t, func(c *rawConn) {
		c.send(evs[0])
		c.send(append(evs[1:], "")...)
	})
	w := newStreamWriter()
	if rec := serveRawStream(t, url, noFlush{w}); rec.Status != http.StatusOK {
		t.Errorf("record status %d", rec.Status)
	}
	if want := strings.Join(evs, ""); w.body.String() != want || w.flushes != 0 {
		t.Fatalf("the client got %q in %d flushes, want %q", w.body.String(), w.flushes, want)
	}
}

// nextFlush returns what the client has at the relay's next flush, and
// fails the test (instead of hanging until the test binary's timeout) when
// the relay holds the events back: the upstream waits for the client.
func nextFlush(t *testing.T, flushed <-chan string) string {
	t.Helper()
	select {
	case body := <-flushed:
		return body
	case <-time.After(10 * time.Second):
		t.Fatal("no flush within 10 s: the relay held the upstream's events back, and the upstream waits for the client to have them")
		return ""
	}
}
