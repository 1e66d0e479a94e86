package main

import (
	"bytes"
	"fmt"
	"sort"
)

// Ratio is one of Tollgate's figures against a reference proxy's from the
// same run (issue 17), or against direct or its own rest figure where the
// issue says so (Ref "direct" or "rest").
type Ratio struct {
	Ref       string  `json:"ref"`
	Figure    string  `json:"figure"`
	Tollgate  string  `json:"tollgate"`
	Reference string  `json:"reference"`
	Value     float64 `json:"value"` // the ratio, or the difference in µs for a gap
	Shown     string  `json:"shown"`
	Target    string  `json:"target,omitempty"`
	Status    string  `json:"status"` // PASS, MISS, n/a (no sound ratio), not run, or "" (no target)
}

// figure is one figure of issue 17 and how to compare it.
type figure struct {
	name   string
	scn    string
	param  float64 // the point; 0: the scenario's first point
	of     func(p *Point, rr *RunResult) float64
	unit   func(float64) string
	diff   bool    // compare tollgate − reference (µs) instead of tollgate ÷ reference
	higher bool    // more is better
	limit  float64 // against HAProxy: the ratio (or difference) allowed
	goMax  float64 // against the Go proxy: "ahead" is 1 (ratio) or 0 (difference)
	noErrs bool    // Tollgate must also have had no errors
}

func addedOf(pick func(Percentiles) float64) func(p *Point, rr *RunResult) float64 {
	return func(p *Point, rr *RunResult) float64 { return pick(rr.Lat) - pick(p.Direct.Lat) }
}

var figures = []figure{
	{name: "CPU per 1,000 answers, (c) 32 clients", scn: "c", param: 32, limit: 2, goMax: 1,
		of: func(_ *Point, rr *RunResult) float64 {
			if rr.Throughput <= 0 {
				return 0
			}
			return 1000 * rr.Usage.GatewayCPU / rr.Throughput
		}, unit: func(v float64) string { return fmt.Sprintf("%.3f s", v) }},
	{name: "added p50, (a) 1 client", scn: "a", param: 1, limit: 1.5, goMax: 1,
		of: addedOf(func(l Percentiles) float64 { return l.P50 }), unit: fmtAdded},
	{name: "added p99, (a) 1 client", scn: "a", param: 1, limit: 3, goMax: 1,
		of: addedOf(func(l Percentiles) float64 { return l.P99 }), unit: fmtAdded},
	{name: "streams/s, (b) 50 chunks, 16 clients", scn: "b", param: StreamRatioClients, higher: true, limit: 0.9, goMax: 1,
		of: func(_ *Point, rr *RunResult) float64 { return rr.Throughput }, unit: func(v float64) string { return fmt.Sprintf("%.0f", v) }},
	{name: "added inter-chunk gap p99, (f) paced streams", scn: "f", diff: true, limit: 100, goMax: 0,
		of: func(p *Point, rr *RunResult) float64 {
			if rr.Gap == nil || p.Direct.Gap == nil {
				return 0
			}
			return rr.Gap.P99 - p.Direct.Gap.P99
		}, unit: fmtAdded},
	{name: "added p99, (d) 3,000 req/s", scn: "d", param: 3000, limit: 3, goMax: 1, noErrs: true,
		of: addedOf(func(l Percentiles) float64 { return l.P99 }), unit: fmtAdded},
}

// pointAt is scenario id's point at param (0: the first), measured on
// both sides.
func (r *Results) pointAt(id string, param float64) *Point {
	if param != 0 {
		return r.point(id, param)
	}
	if s := r.scenario(id); s != nil && len(s.Points) > 0 && s.Points[0].Direct != nil && s.Points[0].Gateway != nil {
		return s.Points[0]
	}
	return nil
}

// compute compares Tollgate's figure with ref's; limit is the target (a
// NaN-free 0 with hasTarget false means none).
func (f figure) compute(p *Point, ref string, limit float64, hasTarget bool) Ratio {
	out := Ratio{Ref: ref, Figure: f.name, Status: "not run"}
	if hasTarget {
		out.Target = f.targetText(limit, ref)
	}
	if p == nil || p.Refs[ref] == nil {
		return out
	}
	tg, rf := f.of(p, p.Gateway), f.of(p, p.Refs[ref])
	out.Tollgate, out.Reference = f.unit(tg), f.unit(rf)
	ok := false
	switch {
	case f.diff:
		out.Value, out.Shown = tg-rf, fmtAdded(tg-rf)
		ok = out.Value <= limit
	case rf <= 0:
		out.Status, out.Shown = "n/a", "n/a (reference figure ≤ 0)"
		return out
	default:
		out.Value = tg / rf
		out.Shown = fmt.Sprintf("%.2f×", out.Value)
		ok = out.Value <= limit
		if f.higher {
			ok = out.Value >= limit
		}
	}
	if f.noErrs && p.Gateway.Errors > 0 {
		ok = false
		out.Shown += fmt.Sprintf(", %d errors", p.Gateway.Errors)
	}
	out.Status = ""
	if hasTarget {
		out.Status = status(ok)
	}
	return out
}

func (f figure) targetText(limit float64, ref string) string {
	switch {
	case f.diff && limit == 0:
		return "≤ " + ref + "'s"
	case f.diff:
		return fmt.Sprintf("≤ %s's %s", ref, fmtAdded(limit))
	case f.higher:
		return fmt.Sprintf("≥ %.2g×", limit)
	default:
		return fmt.Sprintf("≤ %.2g×", limit)
	}
}

// computeRatios fills r.Ratios: every figure against every reference
// (targets against HAProxy and the Go proxy), then the figures of issue 17
// measured against direct or the node's own rest.
func (r *Results) computeRatios() {
	r.Ratios = nil
	for _, ref := range r.Refs {
		for _, f := range figures {
			limit, has := 0.0, false
			switch ref.Name {
			case RefHAProxy:
				limit, has = f.limit, true
			case RefGoProxy:
				limit, has = f.goMax, true
			}
			r.Ratios = append(r.Ratios, f.compute(r.pointAt(f.scn, f.param), ref.Name, limit, has))
		}
	}
	r.Ratios = append(r.Ratios, r.slowUpstreamRatio(), r.memoryRatio())
}

// slowUpstreamRatio: (e) at 5,000 req/s, p99 ≤ direct's + 5 % and no errors.
func (r *Results) slowUpstreamRatio() Ratio {
	out := Ratio{Ref: "direct", Figure: "p99, (e) 5,000 req/s, 300 ms upstream, zero errors", Target: "≤ 1.05×", Status: "not run"}
	p := r.point("e", 5000)
	if p == nil || p.Direct.Lat.P99 <= 0 {
		return out
	}
	out.Tollgate, out.Reference = fmtUS(p.Gateway.Lat.P99), fmtUS(p.Direct.Lat.P99)
	out.Value = p.Gateway.Lat.P99 / p.Direct.Lat.P99
	out.Shown = fmt.Sprintf("%.2f×, %d errors", out.Value, p.Gateway.Errors)
	out.Status = status(out.Value <= 1.05 && p.Gateway.Errors == 0)
	return out
}

// memoryRatio: RSS a minute after the load within 1.5× the RSS at rest.
func (r *Results) memoryRatio() Ratio {
	out := Ratio{Ref: "rest", Figure: "RSS a minute after the load ÷ RSS at rest", Target: "≤ 1.5×", Status: "not run"}
	fp := r.Footprint
	if fp == nil || fp.RSSMinuteAfterLoadMB <= 0 || fp.RSSRestMB <= 0 {
		return out
	}
	out.Tollgate, out.Reference = fmt.Sprintf("%.1f MB", fp.RSSMinuteAfterLoadMB), fmt.Sprintf("%.1f MB", fp.RSSRestMB)
	out.Value = fp.RSSMinuteAfterLoadMB / fp.RSSRestMB
	out.Shown = fmt.Sprintf("%.2f×", out.Value)
	out.Status = status(out.Value <= 1.5)
	return out
}

// mdRatios writes the section of the ratios, one table per reference.
func (r *Results) mdRatios(b *bytes.Buffer) {
	if len(r.Ratios) == 0 {
		return
	}
	pf := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pf("## Against the limit (issue 17)\n\nTollgate's figures divided by each reference's from the same run, at the same points (for gaps: the difference of the added gap p99). HAProxy, a plain L7 hop that parses no JSON, is the limit; the Go proxy is the bare `httputil.ReverseProxy` Tollgate must stay ahead of.\n\n")
	pf("| against | figure | Tollgate | reference | ratio | target | result |\n|---|---|---:|---:|---:|---|---|\n")
	for _, x := range r.Ratios {
		res := x.Status
		if res == "PASS" || res == "MISS" {
			res = "**" + res + "**"
		}
		pf("| %s | %s | %s | %s | %s | %s | %s |\n", x.Ref, x.Figure, x.Tollgate, x.Reference, x.Shown, x.Target, res)
	}
	pf("\n")
	for _, ref := range r.Refs {
		pf("- *%s*: %s, at %s.\n", ref.Name, ref.What, ref.Base)
	}
	pf("\nIn the scenario tables below each reference has rows of its own: its req/s and latency, its process's CPU in the *gw CPU* column and its RSS in *gw RSS* (none for a gateway given with -compare), and its latency added to direct.\n\n")
}

// refRuns are p's reference medians, by name.
func (p *Point) refRuns() []*RunResult {
	names := make([]string, 0, len(p.Refs))
	for n := range p.Refs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*RunResult, 0, len(names))
	for _, n := range names {
		if p.Refs[n] != nil {
			out = append(out, p.Refs[n])
		}
	}
	return out
}
