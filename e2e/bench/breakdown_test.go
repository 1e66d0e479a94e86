package main

import (
	"math"
	"strings"
	"testing"
)

const sampleTraces = `File: tollgate
Type: cpu
Duration: 10s, Total samples = 100ms (1%)
-----------+-------------------------------------------------------
      40ms   internal/runtime/syscall/linux.Syscall6
             net.(*conn).Write
             github.com/tollgate/tollgate/node/proxy.(*h1Conn).roundTrip
             github.com/tollgate/tollgate/node/proxy.(*Transport).RoundTrip
             github.com/tollgate/tollgate/node/proxy.(*Handler).attempt
             net/http.(*conn).serve
-----------+-------------------------------------------------------
      30ms   runtime.scanobject
             runtime.gcDrain
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
      20ms   net/textproto.readMIMEHeader
             net/http.readRequest
             net/http.(*conn).serve
-----------+-------------------------------------------------------
    pebble:  flush
      10ms   github.com/tollgate/tollgate/routing.validString (inline)
             github.com/tollgate/tollgate/node/proxy.validAnswer
             github.com/tollgate/tollgate/node/proxy.(*Handler).buffered
-----------+-------------------------------------------------------
`

func TestBreakdownSortsSamplesIntoHops(t *testing.T) {
	shares, total, err := breakdown(strings.NewReader(sampleTraces))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(total-0.1) > 1e-9 {
		t.Errorf("total %v s, want 0.1", total)
	}
	got := map[string]float64{}
	for _, s := range shares {
		got[s.Name] = s.Share
	}
	for name, want := range map[string]float64{
		"upstream client (HTTP/1.1 to the mock)":                     0.4, // before net/http, whose serve is on the same stack
		"garbage collection":                                         0.3,
		"net/http server (parse, write, connection)":                 0.2,
		"request and answer checks (scan, rewrite, validate, usage)": 0.1,
	} {
		if math.Abs(got[name]-want) > 1e-9 {
			t.Errorf("%s: %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
	if len(shares) != 4 {
		t.Errorf("%d hops, want 4: %v", len(shares), shares)
	}
}
