package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Target is one endpoint a run sends to, with the request it sends and
// what a valid answer looks like.
type Target struct {
	Name     string // "direct" or "tollgate"
	URL      string
	Body     []byte
	Header   http.Header // shared and read-only
	Stream   bool
	Chunks   int    // streams: the exact number of data chunks expected
	Shape    string // non-streams: the top-level array a valid body has
	MinBytes int    // non-streams: the smallest valid body
}

// RunResult is what one measured run of one target produced.
type RunResult struct {
	Target     string         `json:"target"`
	OK         int64          `json:"ok"`
	Errors     int64          `json:"errors"`
	Unsent     int64          `json:"unsent,omitempty"` // open loop: scheduled but never sent within the time bound
	Elapsed    float64        `json:"elapsed_s"`
	Throughput float64        `json:"throughput_rps"` // valid responses per second
	Lat        Percentiles    `json:"latency"`
	TTFT       *Percentiles   `json:"ttft,omitempty"`
	Gap        *Percentiles   `json:"gap,omitempty"`
	SendLag    *Percentiles   `json:"send_lag,omitempty"` // open loop: actual minus intended send time
	ErrSamples map[string]int `json:"error_samples,omitempty"`
	Usage      Usage          `json:"usage"`

	lat, ttft, gap, lag *Hist
}

// newTransport returns a client tuned for load: enough idle connections
// for every worker, no compression, no HTTP/2, bounded timeouts.
func newTransport(conns int) (*http.Client, *http.Transport) {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          0, // no global limit
		MaxIdleConnsPerHost:   conns + 16,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		ResponseHeaderTimeout: 30 * time.Second,
		WriteBufferSize:       16 << 10,
		ReadBufferSize:        16 << 10,
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}, tr
}

// worker sends requests one at a time and keeps its own histograms, so
// the measuring path takes no locks and allocates nothing of its own.
type worker struct {
	tgt        *Target
	client     *http.Client
	br         *bufio.Reader
	buf        []byte
	lat, ttft  Hist
	gap, lag   Hist
	ok, errs   int64
	errSamples map[string]int
	record     bool
}

const maxErrSamples = 8

func newWorker(t *Target, c *http.Client) *worker {
	w := &worker{tgt: t, client: c, buf: make([]byte, 0, 2<<10)}
	if t.Stream {
		w.br = bufio.NewReaderSize(nil, 16<<10)
	}
	return w
}

func (w *worker) fail(err error) {
	if !w.record {
		return
	}
	w.errs++
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	if w.errSamples == nil {
		w.errSamples = map[string]int{}
	}
	if _, ok := w.errSamples[msg]; ok || len(w.errSamples) < maxErrSamples {
		w.errSamples[msg]++
	}
}

// one sends one request and validates the answer; latency and time to
// first chunk are measured from `from` (the actual send time in a closed
// loop, the intended one in an open loop).
func (w *worker) one(ctx context.Context, from time.Time) {
	t := w.tgt
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(t.Body))
	if err != nil {
		w.fail(err)
		return
	}
	req.Header = t.Header
	resp, err := w.client.Do(req)
	if err != nil {
		w.fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := readAllInto(resp.Body, w.buf)
		w.buf = b[:0]
		w.fail(fmt.Errorf("status %d: %.100s", resp.StatusCode, b))
		return
	}
	if t.Stream {
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			w.fail(fmt.Errorf("stream answered with Content-Type %q", ct))
			return
		}
		w.br.Reset(resp.Body)
		var gaps *Hist
		if w.record {
			gaps = &w.gap
		}
		first, err := readStream(w.br, t.Chunks, gaps)
		end := time.Now()
		w.br.Reset(nil)
		if err != nil {
			w.fail(err)
			return
		}
		if w.record {
			w.ok++
			w.lat.Record(end.Sub(from))
			w.ttft.Record(first.Sub(from))
		}
		return
	}
	b, err := readAllInto(resp.Body, w.buf)
	end := time.Now()
	w.buf = b[:0]
	if err != nil {
		w.fail(fmt.Errorf("reading body: %w", err))
		return
	}
	if err := validateBody(b, t.Shape, t.MinBytes); err != nil {
		w.fail(err)
		return
	}
	if w.record {
		w.ok++
		w.lat.Record(end.Sub(from))
	}
}

// collect merges the workers' figures into a RunResult.
func collect(t *Target, ws []*worker, elapsed time.Duration, openLoop bool) *RunResult {
	r := &RunResult{Target: t.Name, Elapsed: elapsed.Seconds(), lat: &Hist{}, ttft: &Hist{}, gap: &Hist{}, lag: &Hist{}}
	for _, w := range ws {
		r.OK += w.ok
		r.Errors += w.errs
		r.lat.Merge(&w.lat)
		r.ttft.Merge(&w.ttft)
		r.gap.Merge(&w.gap)
		r.lag.Merge(&w.lag)
		for k, v := range w.errSamples {
			if r.ErrSamples == nil {
				r.ErrSamples = map[string]int{}
			}
			if _, ok := r.ErrSamples[k]; ok || len(r.ErrSamples) < maxErrSamples {
				r.ErrSamples[k] += v
			}
		}
	}
	if elapsed > 0 {
		r.Throughput = float64(r.OK) / elapsed.Seconds()
	}
	r.Lat = r.lat.Summary()
	if t.Stream {
		s, g := r.ttft.Summary(), r.gap.Summary()
		r.TTFT, r.Gap = &s, &g
	}
	if openLoop {
		s := r.lag.Summary()
		r.SendLag = &s
	}
	return r
}

// ClosedLoop is a run of `Clients` workers, each sending its next request
// as soon as the previous one is answered.
type ClosedLoop struct {
	Clients     int
	Warmup, Dur time.Duration
	MaxRequests int64 // bound on requests per phase (warm-up and measurement each)
}

// Run warms up (unrecorded), then measures for Dur. mon, if not nil, is
// started and stopped around the measurement.
func (c ClosedLoop) Run(t *Target, mon *Monitor) *RunResult {
	client, tr := newTransport(c.Clients)
	defer tr.CloseIdleConnections()
	ws := make([]*worker, c.Clients)
	for i := range ws {
		ws[i] = newWorker(t, client)
	}
	phase := func(d time.Duration, record bool) time.Duration {
		// Requests still running this long after the window are cancelled
		// (and counted as errors): every phase is bounded in time.
		ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
		defer cancel()
		start := time.Now()
		end := start.Add(d)
		var sent atomic.Int64
		var wg sync.WaitGroup
		for _, w := range ws {
			w.record = record
			wg.Add(1)
			go func() {
				defer wg.Done()
				for sent.Add(1) <= c.MaxRequests {
					now := time.Now()
					if !now.Before(end) {
						return
					}
					w.one(ctx, now)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	if c.Warmup > 0 {
		phase(c.Warmup, false)
	}
	mon.Begin()
	elapsed := phase(c.Dur, true)
	usage := mon.End()
	r := collect(t, ws, elapsed, false)
	r.Usage = usage
	return r
}

// schedule is an open loop's fixed send plan: n requests, the i-th at
// start + i/rate.
type schedule struct {
	start time.Time
	rate  float64 // requests per second
	n     int64
}

func newSchedule(start time.Time, rate float64, d time.Duration) schedule {
	return schedule{start: start, rate: rate, n: int64(math.Floor(rate * d.Seconds()))}
}

// at is the intended send time of request i.
func (s schedule) at(i int64) time.Time {
	return s.start.Add(time.Duration(math.Round(float64(i) * 1e9 / s.rate)))
}

// poolSize is how many workers an open loop needs so that, with each
// request taking up to lat, the schedule is never held back by a lack of
// workers (Little's law with a margin), within a bound.
func poolSize(rate float64, lat time.Duration, maxWorkers int) int {
	n := int(math.Ceil(rate*(lat.Seconds()+0.05)*2)) + 16
	return min(n, maxWorkers)
}

// OpenLoop is a run that sends at a fixed rate whatever the answers do;
// latency is measured from each request's intended send time, so time
// spent waiting (in the gateway, or for a free worker) is counted.
type OpenLoop struct {
	Rate        float64
	Warmup, Dur time.Duration
	ExpectLat   time.Duration // the upstream's own latency, for the pool size
	MaxWorkers  int
	Grace       time.Duration // how long after the schedule ends answers are awaited
}

// Run warms up at the same rate (unrecorded), then measures.
func (o OpenLoop) Run(t *Target, mon *Monitor) *RunResult {
	workers := poolSize(o.Rate, o.ExpectLat, o.MaxWorkers)
	client, tr := newTransport(workers)
	defer tr.CloseIdleConnections()
	ws := make([]*worker, workers)
	for i := range ws {
		ws[i] = newWorker(t, client)
	}
	phase := func(d time.Duration, record bool) (time.Duration, int64) {
		// Start slightly in the future so all workers are waiting.
		sched := newSchedule(time.Now().Add(20*time.Millisecond), o.Rate, d)
		hard := sched.start.Add(d + o.Grace)
		ctx, cancel := context.WithDeadline(context.Background(), hard)
		defer cancel()
		var next, unsent atomic.Int64
		var wg sync.WaitGroup
		for _, w := range ws {
			w.record = record
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= sched.n {
						return
					}
					at := sched.at(i)
					if wait := time.Until(at); wait > 0 {
						time.Sleep(wait)
					}
					now := time.Now()
					if !now.Before(hard) {
						unsent.Add(1)
						continue
					}
					if record {
						w.lag.Record(now.Sub(at))
					}
					w.one(ctx, at)
				}
			}()
		}
		wg.Wait()
		return time.Since(sched.start), unsent.Load()
	}
	if o.Warmup > 0 {
		phase(o.Warmup, false)
	}
	mon.Begin()
	span, unsent := phase(o.Dur, true)
	usage := mon.End()
	// The achieved rate is over the schedule's length, or longer when the
	// answers lagged behind it: the time until the last answer less the
	// upstream's own latency.
	r := collect(t, ws, max(o.Dur, span-o.ExpectLat), true)
	r.Unsent = unsent
	r.Errors += unsent
	if unsent > 0 {
		if r.ErrSamples == nil {
			r.ErrSamples = map[string]int{}
		}
		r.ErrSamples["not sent within the time bound"] += int(unsent)
	}
	r.Usage = usage
	return r
}
