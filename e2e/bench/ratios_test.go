package main

import (
	"math"
	"strings"
	"testing"
)

// refPoint is a point with direct, Tollgate and the references' medians.
func refPoint(param float64, d, g *RunResult, refs map[string]*RunResult) *Point {
	d.Target, g.Target = "direct", "tollgate"
	for n, r := range refs {
		r.Target = n
	}
	return &Point{Label: "p", Param: param, Direct: d, Gateway: g, Refs: refs, AddedLat: diff(g.Lat, d.Lat)}
}

func ratioResults() *Results {
	lat := func(p50, p99 float64) Percentiles { return Percentiles{P50: p50, P99: p99} }
	return &Results{
		Refs: []*Ref{{Name: RefHAProxy}, {Name: RefGoProxy}, {Name: "other"}},
		Scenarios: []*Scenario{
			{ID: "a", Points: []*Point{refPoint(1, &RunResult{Lat: lat(100, 300)}, &RunResult{Lat: lat(250, 900)}, map[string]*RunResult{
				RefHAProxy: {Lat: lat(200, 500)}, // added 100 / 200
				RefGoProxy: {Lat: lat(400, 1300)},
				"other":    {Lat: lat(90, 1000)}, // faster than direct: no sound ratio of added p50
			})}},
			{ID: "b", Points: []*Point{refPoint(16, &RunResult{Throughput: 2000}, &RunResult{Throughput: 900}, map[string]*RunResult{
				RefHAProxy: {Throughput: 1000}, RefGoProxy: {Throughput: 800},
			})}},
			{ID: "c", Points: []*Point{refPoint(32, &RunResult{Throughput: 10000}, &RunResult{Throughput: 5000, Usage: Usage{GatewayCPU: 0.5}}, map[string]*RunResult{
				RefHAProxy: {Throughput: 8000, Usage: Usage{GatewayCPU: 0.3}}, // 0.1 s vs 0.0375 s per 1,000: 2.67×
				RefGoProxy: {Throughput: 4000, Usage: Usage{GatewayCPU: 0.6}},
			})}},
			{ID: "f", Points: []*Point{refPoint(10, &RunResult{Gap: &Percentiles{P99: 5200}}, &RunResult{Gap: &Percentiles{P99: 5350}}, map[string]*RunResult{
				RefHAProxy: {Gap: &Percentiles{P99: 5260}}, // Tollgate adds 150, HAProxy 60: +90 µs
				RefGoProxy: {Gap: &Percentiles{P99: 5300}},
			})}},
			{ID: "d", Points: []*Point{refPoint(3000, &RunResult{Lat: lat(100, 1000)}, &RunResult{Lat: lat(200, 2000), Errors: 2}, map[string]*RunResult{
				RefHAProxy: {Lat: lat(150, 1500)}, RefGoProxy: {Lat: lat(150, 3000)},
			})}},
		},
		Footprint: &Footprint{RSSRestMB: 28, RSSMinuteAfterLoadMB: 45, RestAfterLoadS: 60},
	}
}

func TestRatiosComputeTollgateAgainstEachReferenceWithItsTarget(t *testing.T) {
	r := ratioResults()
	r.computeRatios()
	got := map[string]Ratio{}
	for _, x := range r.Ratios {
		got[x.Ref+" "+x.Figure] = x
	}
	for _, c := range []struct {
		key    string
		value  float64
		status string
	}{
		{"haproxy CPU per 1,000 answers, (c) 32 clients", 0.1 / 0.0375, "MISS"},
		{"goproxy CPU per 1,000 answers, (c) 32 clients", 0.1 / 0.15, "PASS"},
		{"haproxy added p50, (a) 1 client", 1.5, "PASS"},
		{"haproxy added p99, (a) 1 client", 3, "PASS"},
		{"goproxy added p50, (a) 1 client", 0.5, "PASS"},
		{"haproxy streams/s, (b) 50 chunks, 16 clients", 0.9, "PASS"},
		{"goproxy streams/s, (b) 50 chunks, 16 clients", 900.0 / 800, "PASS"},
		{"haproxy added inter-chunk gap p99, (f) paced streams", 90, "PASS"},
		{"goproxy added inter-chunk gap p99, (f) paced streams", 50, "MISS"},
		{"haproxy added p99, (d) 3,000 req/s", 2, "MISS"}, // within 3×, but with errors
		{"other CPU per 1,000 answers, (c) 32 clients", 0, "not run"},
		{"other added p99, (a) 1 client", 600.0 / 700, ""}, // no target for a -compare gateway
		{"other added p50, (a) 1 client", 0, "n/a"},
		{"direct p99, (e) 5,000 req/s, 300 ms upstream, zero errors", 0, "not run"},
		{"rest RSS a minute after the load ÷ RSS at rest", 45.0 / 28, "MISS"},
	} {
		x, ok := got[c.key]
		if !ok {
			t.Errorf("no ratio %q", c.key)
			continue
		}
		if x.Status != c.status || math.Abs(x.Value-c.value) > 1e-9 {
			t.Errorf("%s: %v %q (%s), want %v %q", c.key, x.Value, x.Status, x.Shown, c.value, c.status)
		}
	}
	if n := len(r.Ratios); n != 3*len(figures)+2 {
		t.Errorf("%d ratios, want %d", n, 3*len(figures)+2)
	}
}

func TestRatiosSectionOfTheReport(t *testing.T) {
	r := ratioResults()
	r.evaluate()
	md := string(r.markdown(r.charts()))
	for _, want := range []string{"## Against the limit (issue 17)", "| haproxy | CPU per 1,000 answers, (c) 32 clients | 0.100 s | 0.037 s | 2.67× | ≤ 2× | **MISS** |",
		"| haproxy | added inter-chunk gap p99, (f) paced streams | +150 µs | +60 µs | +90 µs | ≤ haproxy's +100 µs | **PASS** |",
		"| p | haproxy | 8000 |", "| p | haproxy added / ratio |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestSlowUpstreamRatioWantsDirectsP99PlusFivePercentAndNoErrors(t *testing.T) {
	for _, c := range []struct {
		p99    float64
		errs   int64
		status string
	}{{315_000, 0, "PASS"}, {316_000, 0, "MISS"}, {300_000, 1, "MISS"}} {
		r := &Results{Scenarios: []*Scenario{{ID: "e", Points: []*Point{refPoint(5000,
			&RunResult{Lat: Percentiles{P99: 300_000}}, &RunResult{Lat: Percentiles{P99: c.p99}, Errors: c.errs}, nil)}}}}
		if x := r.slowUpstreamRatio(); x.Status != c.status {
			t.Errorf("p99 %v, %d errors: %s (%s), want %s", c.p99, c.errs, x.Status, x.Shown, c.status)
		}
	}
}
