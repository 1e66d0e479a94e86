package telemetry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// lateReader is a transport that answers at once and reads the request's
// body after, once the answer's body is closed, as net/http's may (its
// RoundTripper contract: the body may be read and closed from another
// goroutine after RoundTrip returned; its HTTP/1 transport does when a
// receiver answers before it has read the request).
type lateReader struct{ got chan []byte }

func (l lateReader) RoundTrip(req *http.Request) (*http.Response, error) {
	answered := make(chan struct{})
	go func() {
		<-answered
		b, _ := io.ReadAll(req.Body)
		l.got <- b
		_ = req.Body.Close()
	}()
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Request: req,
		Body: closeNotifier{Reader: strings.NewReader(""), closed: answered}}, nil
}

type closeNotifier struct {
	io.Reader
	closed chan struct{}
}

func (c closeNotifier) Close() error { close(c.closed); return nil }

// post lends the span queue's buffer as the request's body, and the queue
// writes its next batch there once post returned: post must return only
// once the transport closed the body, or the receiver may get bytes of
// the next batch (and -race reports the overwrite).
func TestHTTPExporterReturnsOnlyOnceTheTransportClosedTheBody(t *testing.T) {
	cfg, err := httpConfigFrom(mapEnv(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, gzip := range []bool{false, true} {
		cfg.gzip = gzip
		e := newHTTPExporter(cfg)
		l := lateReader{got: make(chan []byte, 1)}
		e.client.Transport = l
		body := bytes.Repeat([]byte("span"), 1<<18)
		if err := e.post(context.Background(), body); err != nil {
			t.Fatal(err)
		}
		var sent []byte
		select {
		case sent = <-l.got:
		default:
			t.Fatalf("gzip %v: post returned before the transport read and closed the body", gzip)
		}
		clear(body) // the next batch, where the span queue writes it
		if !gzip && !bytes.Equal(sent, bytes.Repeat([]byte("span"), 1<<18)) {
			t.Errorf("the transport read %d B, not the request", len(sent))
		}
	}
}
