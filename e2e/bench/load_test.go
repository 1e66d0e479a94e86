package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestScheduleMath(t *testing.T) {
	start := time.Unix(1000, 0)
	s := newSchedule(start, 3000, 30*time.Second)
	if s.n != 90_000 {
		t.Fatalf("3000/s for 30s: %d requests", s.n)
	}
	if !s.at(0).Equal(start) {
		t.Fatalf("first at %v", s.at(0))
	}
	if d := s.at(3000).Sub(start); d != time.Second {
		t.Fatalf("request 3000 at +%v, want +1s", d)
	}
	if d := s.at(1).Sub(s.at(0)); d != 333333*time.Nanosecond {
		t.Fatalf("spacing %v", d)
	}
	// No drift: the last one is exactly where the rate puts it.
	if d := s.at(s.n - 1).Sub(start); d != 29999666667*time.Nanosecond {
		t.Fatalf("last at +%v", d)
	}
	// Fractional rates and durations round down to whole requests.
	if n := newSchedule(start, 2.5, 3*time.Second).n; n != 7 {
		t.Fatalf("2.5/s for 3s: %d", n)
	}
	if n := newSchedule(start, 5000, 2*time.Second).n; n != 10_000 {
		t.Fatalf("5000/s for 2s: %d", n)
	}
}

func TestPoolSize(t *testing.T) {
	// 5000/s against 300 ms needs ~1500 in flight; the pool has room for
	// twice that with a margin, within the bound.
	if n := poolSize(5000, 300*time.Millisecond, 10000); n < 3000 || n > 4000 {
		t.Fatalf("pool for 5000/s at 300ms: %d", n)
	}
	if n := poolSize(5000, 300*time.Millisecond, 2000); n != 2000 {
		t.Fatalf("bound not applied: %d", n)
	}
	if n := poolSize(1, 0, 100); n < 1 {
		t.Fatalf("pool %d", n)
	}
}

// fakeUpstream answers like mockllm, or badly when told to.
func fakeUpstream(t *testing.T) *httptest.Server {
	body := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("a", 1000) + `"},"finish_reason":"stop"}]}`
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(body))
		case "/500":
			w.WriteHeader(500)
			w.Write([]byte(body))
		case "/short":
			w.Write([]byte(`{"choices":[]}`))
		case "/stream", "/stream-nodone":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < 5; i++ {
				fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
				w.(http.Flusher).Flush()
			}
			if r.URL.Path == "/stream" {
				w.Write([]byte("data: [DONE]\n\n"))
			}
		}
	}))
}

func TestClosedLoopValidates(t *testing.T) {
	srv := fakeUpstream(t)
	defer srv.Close()
	run := func(path string, stream bool) *RunResult {
		tg := &Target{Name: path, URL: srv.URL + path, Body: []byte(`{}`), Header: http.Header{}, Stream: stream,
			Chunks: 5, Shape: "choices", MinBytes: 1000}
		return ClosedLoop{Clients: 2, Warmup: 10 * time.Millisecond, Dur: 50 * time.Millisecond, MaxRequests: 200}.Run(tg, nil)
	}
	if r := run("/ok", false); r.OK == 0 || r.Errors != 0 || r.Throughput <= 0 || r.Lat.P50 <= 0 {
		t.Fatalf("good answers: %+v", r)
	}
	if r := run("/ok", false); r.OK > 200 {
		t.Fatalf("request bound ignored: %d", r.OK)
	}
	for _, path := range []string{"/500", "/short"} {
		if r := run(path, false); r.OK != 0 || r.Errors == 0 || len(r.ErrSamples) == 0 {
			t.Fatalf("%s counted as success: %+v", path, r)
		}
	}
	if r := run("/stream", true); r.OK == 0 || r.Errors != 0 || r.TTFT == nil || r.Gap.Count == 0 {
		t.Fatalf("good streams: %+v", r)
	}
	if r := run("/stream-nodone", true); r.OK != 0 || r.Errors == 0 {
		t.Fatalf("stream without [DONE] counted as success: %+v", r)
	}
	// A non-stream answer where a stream is expected is an error.
	if r := run("/ok", true); r.OK != 0 || r.Errors == 0 {
		t.Fatalf("JSON answer to a stream request counted as success: %+v", r)
	}
}

func TestOpenLoopSendsOnSchedule(t *testing.T) {
	srv := fakeUpstream(t)
	defer srv.Close()
	tg := &Target{Name: "ok", URL: srv.URL + "/ok", Body: []byte(`{}`), Header: http.Header{}, Shape: "choices", MinBytes: 1000}
	r := OpenLoop{Rate: 500, Dur: 100 * time.Millisecond, MaxWorkers: 50, Grace: 5 * time.Second}.Run(tg, nil)
	if r.OK+r.Errors != 50 || r.Errors != 0 || r.SendLag == nil {
		t.Fatalf("500/s for 100ms: %+v", r)
	}
	if r.Throughput < 50 || r.Throughput > 501 {
		t.Fatalf("achieved rate %.0f", r.Throughput)
	}
}

func TestMedianRun(t *testing.T) {
	mk := func(rps, p50 float64, errs int64) *RunResult {
		return &RunResult{Target: "x", Throughput: rps, Errors: errs, Lat: Percentiles{P50: p50}}
	}
	m := medianRun([]*RunResult{mk(100, 5, 0), mk(300, 1, 2), mk(200, 9, 1)})
	if m.Throughput != 200 || m.Lat.P50 != 5 || m.Errors != 3 {
		t.Fatalf("median run %+v", m)
	}
	if median([]float64{4, 1, 3, 2}) != 2.5 || median(nil) != 0 {
		t.Fatal("median")
	}
}

func TestRSSSlope(t *testing.T) {
	var ss []RSSSample
	for i := 0; i <= 60; i++ {
		mb := 20 + 0.5*float64(i) // 0.5 MB/s = 30 MB/min
		if i < 10 {
			mb = 5 // warm-up, skipped
		}
		ss = append(ss, RSSSample{T: float64(i), MB: mb})
	}
	if s := rssSlope(ss, 0.2) * 60; s < 29.9 || s > 30.1 {
		t.Fatalf("slope %.2f MB/min, want 30", s)
	}
	if rssSlope(ss[:1], 0) != 0 {
		t.Fatal("slope of one sample")
	}
}

func TestChatBodySize(t *testing.T) {
	for _, size := range []int{1024, 64 << 10} {
		for _, model := range []string{"bench", "m?size=1000&x=<y>"} {
			b := chatBody(model, true, size)
			if len(b) != size {
				t.Fatalf("body for %q is %d bytes, want %d", model, len(b), size)
			}
		}
	}
}

func TestPlanPinning(t *testing.T) {
	if p := planPinning(true, 2, "/usr/bin/taskset"); p.Applied || !strings.Contains(p.Note, "only 2 cores") {
		t.Fatalf("2 cores: %+v", p)
	}
	if p := planPinning(true, 8, ""); p.Applied {
		t.Fatalf("no taskset: %+v", p)
	}
	p := planPinning(true, 4, "/usr/bin/taskset")
	if !p.Applied || p.Gateway != "0" || p.Mock != "1" || p.LoadGen != "2-3" {
		t.Fatalf("4 cores: %+v", p)
	}
	if p := planPinning(false, 4, "/usr/bin/taskset"); p.Applied {
		t.Fatalf("not requested: %+v", p)
	}
}
