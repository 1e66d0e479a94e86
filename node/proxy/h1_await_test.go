package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// MemPoint is the process's live heap, goroutine stacks and goroutines.
type MemPoint struct {
	Heap, Stack int64
	Goroutines  int
}

// Settled collects twice (pooled objects survive one collection) and
// reads the live heap, the goroutine stacks and the goroutines. Exported
// for the package's external tests.
func Settled() MemPoint {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return MemPoint{int64(ms.HeapAlloc), int64(ms.StackInuse), runtime.NumGoroutine()}
}

// An exchange waiting for its answer holds neither the request's bytes
// (they went back to their pool once written) nor a read buffer (taken
// when the answer's first bytes arrive), and the client runs it on the
// caller's goroutine alone: 64 requests in flight to an upstream that
// holds its answers add under 4 KiB of heap each (they held 16 KiB of read
// buffer and 8 KiB of request bytes each) and one goroutine each, the
// caller's.
func TestExchangeAwaitingItsAnswerHoldsNoBuffers(t *testing.T) {
	const n = 64
	var mu sync.Mutex
	gate := make(chan struct{})
	arrived := make(chan struct{}, n)
	current := func() chan struct{} { mu.Lock(); defer mu.Unlock(); return gate }
	url, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		br.Reset(nil)
		br = bufio.NewReaderSize(c, 16) // the smallest: the server's own heap stays out of the figures
		for {
			if _, ok := readRequest(br); !ok {
				return
			}
			g := current() // before the arrival: the test swaps the gate once every request arrived
			arrived <- struct{}{}
			<-g
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
	})
	tr := NewTransport()
	t.Cleanup(tr.CloseIdleConnections)
	body := strings.Repeat("x", 1000)
	var before MemPoint
	for round := range 2 {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(got) != "ok" {
					t.Errorf("body %q, %v", got, err)
				}
			})
		}
		for range n {
			<-arrived
		}
		if round == 1 {
			during := Settled()
			heap := float64(during.Heap-before.Heap) / n
			goroutines := float64(during.Goroutines-before.Goroutines) / n
			t.Logf("per exchange in flight: %.0f B of heap, %.2f goroutines", heap, goroutines)
			if heap > 4<<10 {
				t.Errorf("an exchange waiting for its answer holds %.0f B of heap, want under 4 KiB", heap)
			}
			if goroutines > 1 {
				t.Errorf("%.2f goroutines per exchange in flight, want 1 (the caller's)", goroutines)
			}
		}
		mu.Lock()
		close(gate)
		gate = make(chan struct{})
		mu.Unlock()
		wg.Wait()
		if round == 0 {
			before = Settled() // every connection made, idle in the pool
		}
	}
}

// What the wait for an answer meets is reported as a read of the
// connection would report it: a reset as a reset, a close as EOF.
func TestAwaitedAnswerReportsResetAndClose(t *testing.T) {
	url, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		req, ok := readRequest(br)
		if !ok {
			return
		}
		if req.URL.Path == "/reset" {
			_ = c.(*net.TCPConn).SetLinger(0) // close with a RST
		}
	})
	tr := NewTransport()
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodPost, url+"/reset", strings.NewReader("x"))
	_, err := tr.RoundTrip(req)
	var op *net.OpError
	if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &op) || op.Op != "read" {
		t.Errorf("reset: %v, want a read error of a connection reset", err)
	}
	req, _ = http.NewRequest(http.MethodPost, url+"/close", strings.NewReader("x"))
	if _, err := tr.RoundTrip(req); !errors.Is(err, io.EOF) {
		t.Errorf("close: %v, want EOF", err)
	}
}
