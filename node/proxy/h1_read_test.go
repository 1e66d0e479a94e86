package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// readCounter counts the reads of a connection (each one system call).
type readCounter struct {
	net.Conn
	reads atomic.Int64
}

func (r *readCounter) Read(p []byte) (int, error) {
	r.reads.Add(1)
	return r.Conn.Read(p)
}

// A stream's events already in the socket come in one read: an 8 KiB
// answer sent in one TCP write (headers and 110 chunked events) takes one
// read, not one per 4 KiB. Between exchanges the idle connection holds no
// read buffer, and takes one again for the next exchange.
func TestUpstreamStreamInTheSocketIsReadInOneSystemCall(t *testing.T) {
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	var body bytes.Buffer
	for i := range 110 {
		ev := fmt.Sprintf("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d\"}}]}\n\n", i)
		body.WriteString(ev)
		answer = fmt.Appendf(answer, "%x\r\n%s\r\n", len(ev), ev)
	}
	answer = append(answer, "0\r\n\r\n"...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = conn.Write(answer)
		}
	}()
	tr := NewTransport()
	t.Cleanup(tr.CloseIdleConnections)
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rc := &readCounter{Conn: nc}
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	p := tr.pool(req)
	c := newH1Conn(p, rc)
	c.idleAt = time.Now()
	p.idle = append(p.idle, c)
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{}`)))
		before := rc.reads.Load()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(bufio.NewReaderSize(resp.Body, 16<<10))
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body.Bytes()) {
			t.Fatalf("exchange %d: body of %d bytes, %v", i, len(got), err)
		}
		if n := rc.reads.Load() - before; n != 1 {
			t.Errorf("exchange %d: %d reads for an answer of %d bytes in the socket, want 1", i, n, len(answer))
		}
		if len(p.idle) != 1 || p.idle[0] != c || c.br != nil {
			t.Fatalf("exchange %d: the connection is not idle without its read buffer (idle %d, buffer %v)", i, len(p.idle), c.br != nil)
		}
	}
}
