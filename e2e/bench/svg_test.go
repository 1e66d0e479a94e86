package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

// decodeSVG checks that b is well-formed XML with an <svg> root and
// counts its elements by name.
func decodeSVG(t *testing.T, b []byte) map[string]int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	counts := map[string]int{}
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				if e.Name.Local != "svg" || e.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("root element %v", e.Name)
				}
			}
			depth++
			counts[e.Name.Local]++
		case xml.EndElement:
			depth--
		}
	}
	if roots != 1 || depth != 0 {
		t.Fatalf("%d root elements, depth %d at the end", roots, depth)
	}
	return counts
}

func TestChartSVGWellFormed(t *testing.T) {
	c := &Chart{Title: `Latency <p99> & "friends"`, XLabel: "clients", YLabel: "ms", LogX: true,
		XTicks: []float64{1, 10, 100},
		Series: []Series{
			{Name: "direct <p50>", X: []float64{1, 10, 50, 100, 200}, Y: []float64{0.1, 0.5, 2, 4, 9}},
			{Name: "tollgate & co", Dash: true, X: []float64{1, 10, 50, 100, 200}, Y: []float64{0.2, 0.9, math.NaN(), 7, 15}},
		}}
	b := c.SVG()
	counts := decodeSVG(t, b)
	if counts["polyline"] != 2 || counts["circle"] != 9 {
		t.Fatalf("elements %v", counts)
	}
	if !strings.Contains(string(b), "Latency &lt;p99&gt; &amp;") {
		t.Fatal("title not escaped")
	}
}

func TestChartSVGEdgeCases(t *testing.T) {
	for name, c := range map[string]*Chart{
		"empty":        {Title: "nothing"},
		"one point":    {Series: []Series{{Name: "a", X: []float64{5}, Y: []float64{5}}}},
		"all zero":     {Series: []Series{{Name: "a", X: []float64{0, 1, 2}, Y: []float64{0, 0, 0}}}},
		"log with 0":   {LogX: true, Series: []Series{{Name: "a", X: []float64{0, 1, 10}, Y: []float64{1, 2, 3}}}},
		"many samples": {Series: []Series{{Name: "rss", X: seq(600), Y: seq(600)}}},
	} {
		t.Run(name, func(t *testing.T) {
			b := c.SVG()
			decodeSVG(t, b)
			if bytes.Contains(b, []byte("NaN")) || bytes.Contains(b, []byte("Inf")) {
				t.Fatalf("NaN or Inf in output:\n%s", b)
			}
		})
	}
}

func seq(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(i)
	}
	return s
}

func TestNiceStep(t *testing.T) {
	for _, c := range []struct{ span, want float64 }{{10, 2}, {10.5, 5}, {100, 20}, {0.9, 0.2}, {0, 1}, {7000, 2000}} {
		if got := niceStep(c.span, 5); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("niceStep(%v) = %v, want %v", c.span, got, c.want)
		}
	}
}

func TestReportFromResults(t *testing.T) {
	p := func(param, ratio float64) *Point {
		d := &RunResult{Target: "direct", Throughput: 1000, Lat: Percentiles{P50: 100, P99: 300}}
		g := &RunResult{Target: "tollgate", Throughput: 1000 * ratio, Lat: Percentiles{P50: 150, P99: 500}, Usage: Usage{GatewayCPU: 0.5, GatewayRSS: 40}}
		return &Point{Label: "x", Param: param, Direct: d, Gateway: g, Ratio: ratio, AddedLat: diff(g.Lat, d.Lat)}
	}
	r := &Results{Date: "2026-01-01", Scenarios: []*Scenario{
		{ID: "a", Title: "A", Points: []*Point{p(1, 0.5), p(10, 0.4)}},
		{ID: "c", Title: "C", Points: []*Point{p(32, 0.3)}},
	}, Footprint: &Footprint{RSSRestMB: 20, ReadyMS: []float64{200}, ReadyMedianMS: 200},
		Soak: &Soak{Rate: 200, Dur: 20, Result: &RunResult{}, Samples: []RSSSample{{0, 20}, {1, 21}}}}
	r.Machine = Machine{NProc: 2, LoadAvgStart: "5.10 4.00 3.00", LoadAvgEnd: "6.00 5.00 4.00"}
	d := &RunResult{Target: "direct", Throughput: 2000, Lat: Percentiles{P50: 900, P99: 5000}, SendLag: &Percentiles{P99: 40_000}}
	r.Scenarios = append(r.Scenarios, &Scenario{ID: "d", Title: "D", Points: []*Point{{Label: "3000 req/s", Param: 3000, Direct: d, Gateway: d}}})
	r.evaluate()
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "load average 5.10") {
		t.Errorf("busy-machine note: %q", r.Notes)
	}
	if n := r.scenario("d").Notes; len(n) != 1 || !strings.Contains(n[0], "could not hold the schedule") {
		t.Errorf("generator-behind note: %q", n)
	}
	if n := r.scenario("a").Notes; len(n) != 0 {
		t.Errorf("closed-loop notes: %q", n)
	}
	status := map[string]string{}
	for _, c := range r.Targets {
		status[c.Scenario+" "+c.Target] = c.Status
	}
	for k, want := range map[string]string{
		"c throughput through Tollgate ≥ 35% of direct": "MISS",
		"a added latency at 1 client: p50 ≤ 100 µs":     "PASS",
		"a added latency at 1 client: p99 ≤ 250 µs":     "PASS",
		"d zero errors": "PASS",
		"d 3,000 req/s held (≥ 99% answered in time)": "MISS",
		"e 5,000 req/s, 300 ms upstream: zero errors": "not run",
		"j RSS at rest ≤ 30 MB":                       "PASS",
		"j ready ≤ 300 ms on an existing data dir":    "PASS",
		"j RSS under (c) ≤ 60 MB":                     "PASS",
	} {
		if status[k] != want {
			t.Errorf("%s: %q, want %q (all: %v)", k, status[k], want, status)
		}
	}
	charts := r.charts()
	for _, name := range []string{"latency-a.svg", "throughput.svg", "rss-soak.svg"} {
		c, ok := charts[name]
		if !ok {
			t.Fatalf("no chart %s", name)
		}
		decodeSVG(t, c.SVG())
	}
	md := string(r.markdown(charts))
	for _, want := range []string{"## Targets of issue 7", "![latency-a.svg](latency-a.svg)", "| x | **added / ratio** | **×0.50** | **+50 µs**", "rss-soak.svg"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
