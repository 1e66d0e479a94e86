package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Machine describes where the run happened.
type Machine struct {
	NProc        int    `json:"nproc"`
	GOMAXPROCS   int    `json:"gomaxprocs"`
	CPUModel     string `json:"cpu_model"`
	MemTotalMB   int    `json:"mem_total_mb"`
	Kernel       string `json:"kernel"`
	GoVersion    string `json:"go_version"`
	Commit       string `json:"commit"`
	Build        string `json:"tollgate_build"`
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
}

// Check is one target of issue 7 and whether the run met it.
type Check struct {
	Scenario string `json:"scenario"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Status   string `json:"status"` // PASS, MISS or "not run"
}

// Results is everything a run produced; results.json is its encoding.
type Results struct {
	Date      string      `json:"date"`
	Started   time.Time   `json:"started"`
	Seconds   float64     `json:"total_seconds"`
	Command   string      `json:"command"`
	Machine   Machine     `json:"machine"`
	Pinning   Pinning     `json:"pinning"`
	Config    Config      `json:"config"`
	Targets   []Check     `json:"targets"`
	Scenarios []*Scenario `json:"scenarios"`
	Footprint *Footprint  `json:"footprint,omitempty"`
	Soak      *Soak       `json:"soak,omitempty"`
	Charts    []string    `json:"charts"`
	Notes     []string    `json:"notes,omitempty"`
	// Refs are the reference proxies measured beside Tollgate and Ratios
	// Tollgate's figures against theirs (issue 17; ratios.go).
	Refs   []*Ref  `json:"refs,omitempty"`
	Ratios []Ratio `json:"ratios,omitempty"`
}

func (r *Results) scenario(id string) *Scenario {
	for _, s := range r.Scenarios {
		if s.ID == id {
			return s
		}
	}
	return nil
}

func (r *Results) point(id string, param float64) *Point {
	if s := r.scenario(id); s != nil {
		for _, p := range s.Points {
			if p.Param == param && p.Direct != nil && p.Gateway != nil {
				return p
			}
		}
	}
	return nil
}

// fmtUS formats a latency given in microseconds.
func fmtUS(v float64) string {
	a := math.Abs(v)
	switch {
	case a < 1000:
		return fmt.Sprintf("%.0f µs", v)
	case a < 10000:
		return fmt.Sprintf("%.2f ms", v/1000)
	default:
		return fmt.Sprintf("%.1f ms", v/1000)
	}
}

// fmtAdded formats a latency difference with its sign.
func fmtAdded(v float64) string {
	if v < 0 {
		return "−" + fmtUS(-v)
	}
	return "+" + fmtUS(v)
}

func status(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// evaluate computes the targets from the measured figures.
func (r *Results) evaluate() {
	var cs checks
	r.checkThroughputAndLatency(&cs)
	r.checkStreams(&cs)
	r.checkOpenLoops(&cs)
	r.checkFootprint(&cs)
	r.Targets = cs
	r.computeRatios()
	r.annotate()
}

// checks collects the targets' outcomes.
type checks []Check

// add records one target; one whose scenario did not run is "not run".
func (cs *checks) add(scn, target, measured string, ok bool, ran bool) {
	st := status(ok)
	if !ran {
		st, measured = "not run", "—"
	}
	*cs = append(*cs, Check{Scenario: scn, Target: target, Measured: measured, Status: st})
}

// checkThroughputAndLatency: (c) throughput and (a) added latency.
func (r *Results) checkThroughputAndLatency(cs *checks) {
	p := r.point("c", 32)
	cs.add("c", "throughput through Tollgate ≥ 35% of direct", func() string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%.1f%% (%.0f vs %.0f req/s)", 100*p.Ratio, p.Gateway.Throughput, p.Direct.Throughput)
	}(), p != nil && p.Ratio >= 0.35 && p.Gateway.Errors == 0, p != nil)

	p = r.point("a", 1)
	cs.add("a", "added latency at 1 client: p50 ≤ 100 µs", func() string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%s (%s vs %s)", fmtAdded(p.AddedLat.P50), fmtUS(p.Gateway.Lat.P50), fmtUS(p.Direct.Lat.P50))
	}(), p != nil && p.AddedLat.P50 <= 100, p != nil)
	cs.add("a", "added latency at 1 client: p99 ≤ 250 µs", func() string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%s (%s vs %s)", fmtAdded(p.AddedLat.P99), fmtUS(p.Gateway.Lat.P99), fmtUS(p.Direct.Lat.P99))
	}(), p != nil && p.AddedLat.P99 <= 250, p != nil)
}

// checkStreams: (f) inter-chunk gap and time to first token.
func (r *Results) checkStreams(cs *checks) {
	var pf *Point
	if s := r.scenario("f"); s != nil && len(s.Points) > 0 && s.Points[0].AddedGap != nil {
		pf = s.Points[0]
	}
	cs.add("f", "added inter-chunk gap p99 ≤ 20 µs", func() string {
		if pf == nil {
			return ""
		}
		return fmt.Sprintf("%s (%s vs %s)", fmtAdded(pf.AddedGap.P99), fmtUS(pf.Gateway.Gap.P99), fmtUS(pf.Direct.Gap.P99))
	}(), pf != nil && pf.AddedGap.P99 <= 20, pf != nil)
	cs.add("f", "added time to first token p50 ≤ 150 µs", func() string {
		if pf == nil {
			return ""
		}
		return fmt.Sprintf("%s (%s vs %s)", fmtAdded(pf.AddedTTFT.P50), fmtUS(pf.Gateway.TTFT.P50), fmtUS(pf.Direct.TTFT.P50))
	}(), pf != nil && pf.AddedTTFT.P50 <= 150, pf != nil)
}

// checkOpenLoops: (d) and (e), rate held, latency and errors.
func (r *Results) checkOpenLoops(cs *checks) {
	p := r.point("d", 3000)
	cs.add("d", "3,000 req/s held (≥ 99% answered in time)", func() string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%.0f req/s answered", p.Gateway.Throughput)
	}(), p != nil && p.Gateway.Throughput >= 0.99*3000, p != nil)
	cs.add("d", "p99 added ≤ 1 ms", func() string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%s (%s vs %s)", fmtAdded(p.AddedLat.P99), fmtUS(p.Gateway.Lat.P99), fmtUS(p.Direct.Lat.P99))
	}(), p != nil && p.AddedLat.P99 <= 1000, p != nil)
	cs.add("d", "zero errors", func() string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%d errors (direct: %d)", p.Gateway.Errors, p.Direct.Errors)
	}(), p != nil && p.Gateway.Errors == 0, p != nil)

	p = r.point("e", 5000)
	cs.add("e", "5,000 req/s, 300 ms upstream: p99 ≤ 320 ms", func() string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%s (direct %s)", fmtUS(p.Gateway.Lat.P99), fmtUS(p.Direct.Lat.P99))
	}(), p != nil && p.Gateway.Lat.P99 <= 320_000, p != nil)
	cs.add("e", "5,000 req/s, 300 ms upstream: zero errors", func() string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%d errors (direct: %d)", p.Gateway.Errors, p.Direct.Errors)
	}(), p != nil && p.Gateway.Errors == 0, p != nil)
}

// checkFootprint: (j) memory and time to ready, (k) growth over the soak.
func (r *Results) checkFootprint(cs *checks) {
	fp := r.Footprint
	cs.add("j", "RSS at rest ≤ 30 MB", func() string {
		if fp == nil {
			return ""
		}
		return fmt.Sprintf("%.1f MB", fp.RSSRestMB)
	}(), fp != nil && fp.RSSRestMB <= 30, fp != nil)
	p := r.point("c", 32)
	cs.add("j", "RSS under (c) ≤ 60 MB", func() string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%.1f MB (peak)", p.Gateway.Usage.GatewayRSS)
	}(), p != nil && p.Gateway.Usage.GatewayRSS <= 60, p != nil)
	cs.add("j", "ready ≤ 300 ms on an existing data dir", func() string {
		if fp == nil || len(fp.ReadyMS) == 0 {
			return ""
		}
		return fmt.Sprintf("%.0f ms (median of %d)", fp.ReadyMedianMS, len(fp.ReadyMS))
	}(), fp != nil && len(fp.ReadyMS) > 0 && fp.ReadyMedianMS <= 300, fp != nil && len(fp.ReadyMS) > 0)
	sk := r.Soak
	cs.add("k", "no RSS growth over the soak (≤ 1 MB/min, zero errors)", func() string {
		if sk == nil {
			return ""
		}
		return fmt.Sprintf("%+.2f MB/min (%.1f → %.1f MB over %.0f s after %.0f s warm-up), %d errors", sk.SlopeMBPerMin, sk.FirstMB, sk.LastMB, sk.Dur, sk.Warmup, sk.Result.Errors)
	}(), sk != nil && sk.SlopeMBPerMin <= 1 && sk.Result.Errors == 0, sk != nil)
}

// annotate adds notes where the figures say the box, not the gateway, set
// the limit: a busy machine, a load generator that fell behind its
// schedule even without the gateway, a noisy stream baseline.
func (r *Results) annotate() {
	var load1 float64
	if f := strings.Fields(r.Machine.LoadAvgStart); len(f) > 0 {
		_, _ = fmt.Sscan(f[0], &load1)
	}
	if r.Machine.NProc > 0 && load1 > float64(r.Machine.NProc) {
		r.Notes = append(r.Notes, fmt.Sprintf("The machine was busy with other work: load average %s at the start and %s at the end on %d cores. "+
			"Every figure is noisier than on a quiet machine (the direct baselines too); re-run on a quiet one before drawing fine conclusions.",
			strings.Fields(r.Machine.LoadAvgStart)[0], firstField(r.Machine.LoadAvgEnd), r.Machine.NProc))
	}
	for _, s := range r.Scenarios {
		s.Notes = nil
		for _, p := range s.Points {
			if p.Direct == nil || p.Gateway == nil {
				continue
			}
			if d := p.Direct; d.SendLag != nil && (d.SendLag.P99 > 10_000 || d.Throughput < 0.99*p.Param) {
				s.Notes = append(s.Notes, fmt.Sprintf("At %s the load generator could not hold the schedule even direct to the mock "+
					"(send lag p99 %s, %.0f req/s answered): on this box the rate is beyond what generator and mock manage, "+
					"so the figures at this point are bounded by the box, not only by the gateway.", p.Label, fmtUS(d.SendLag.P99), d.Throughput))
			}
			if s.ID == "f" && p.Direct.Gap != nil && p.Direct.Gap.P99 > 10_000 {
				s.Notes = append(s.Notes, fmt.Sprintf("The direct inter-chunk gap p99 is %s against the mock's 5 ms interval: the baseline itself "+
					"is noisy (timers and scheduling on a busy box), so a µs-level added gap cannot be read from this run.", fmtUS(p.Direct.Gap.P99)))
			}
		}
	}
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// charts builds the report's charts from the results.
func (r *Results) charts() map[string]*Chart {
	out := map[string]*Chart{}
	put := func(name string, c *Chart) {
		if c != nil && len(c.Series) > 0 {
			out[name] = c
		}
	}
	put("latency-a.svg", r.latencyChart("a", "(a) Non-streaming latency vs clients"))
	put("latency-b.svg", r.latencyChart("b", "(b) Streaming (50 chunks) latency vs clients"))
	put("throughput.svg", r.throughputChart())
	put("latency-e.svg", r.rateChart())
	put("rss-soak.svg", r.soakChart())
	return out
}

var clientXTicks = []float64{1, 2, 5, 10, 20, 50, 100, 200}

// pointSeries is one side's (direct or tollgate) value at each point of s.
func pointSeries(se Series, s *Scenario, gw bool, v func(*RunResult) float64) Series {
	for _, p := range s.Points {
		rr := p.Direct
		if gw {
			rr = p.Gateway
		}
		if rr != nil {
			se.X, se.Y = append(se.X, p.Param), append(se.Y, v(rr))
		}
	}
	return se
}

// sideColor is the color of direct (false) or tollgate (true).
func sideColor(gw bool) string {
	if gw {
		return palette[1]
	}
	return palette[0]
}

// latencyChart is p50 and p99 vs clients of scenario id, both sides.
func (r *Results) latencyChart(id, title string) *Chart {
	s := r.scenario(id)
	if s == nil || len(s.Points) == 0 {
		return nil
	}
	c := &Chart{Title: title, XLabel: "clients (log scale)", YLabel: "latency (ms)", LogX: true, XTicks: clientXTicks}
	for _, t := range []struct {
		name string
		gw   bool
		p99  bool
	}{{"direct p50", false, false}, {"direct p99", false, true}, {"tollgate p50", true, false}, {"tollgate p99", true, true}} {
		c.Series = append(c.Series, pointSeries(Series{Name: t.name, Dash: t.p99, Color: sideColor(t.gw)}, s, t.gw, func(rr *RunResult) float64 {
			if t.p99 {
				return rr.Lat.P99 / 1000
			}
			return rr.Lat.P50 / 1000
		}))
	}
	return c
}

// throughputChart is requests/s vs clients of (a) and (b), both sides.
func (r *Results) throughputChart() *Chart {
	c := &Chart{Title: "Throughput vs clients", XLabel: "clients (log scale)", YLabel: "requests/s", LogX: true, XTicks: clientXTicks}
	for i, id := range []string{"a", "b"} {
		s := r.scenario(id)
		if s == nil {
			continue
		}
		for _, gw := range []bool{false, true} {
			name := "(" + id + ") direct"
			if gw {
				name = "(" + id + ") tollgate"
			}
			c.Series = append(c.Series, pointSeries(Series{Name: name, Dash: i == 1, Color: sideColor(gw)}, s, gw,
				func(rr *RunResult) float64 { return rr.Throughput }))
		}
	}
	return c
}

// rateChart is (e)'s p99 vs offered rate, both sides.
func (r *Results) rateChart() *Chart {
	s := r.scenario("e")
	if s == nil || len(s.Points) == 0 {
		return nil
	}
	c := &Chart{Title: "(e) p99 latency vs offered rate, 300 ms upstream", XLabel: "offered requests/s", YLabel: "p99 latency (ms)"}
	for _, gw := range []bool{false, true} {
		name := "direct p99"
		if gw {
			name = "tollgate p99"
		}
		c.Series = append(c.Series, pointSeries(Series{Name: name, Color: sideColor(gw)}, s, gw,
			func(rr *RunResult) float64 { return rr.Lat.P99 / 1000 }))
	}
	for _, p := range s.Points {
		c.XTicks = append(c.XTicks, p.Param)
	}
	return c
}

// soakChart is the gateway's RSS during the soak.
func (r *Results) soakChart() *Chart {
	sk := r.Soak
	if sk == nil || len(sk.Samples) == 0 {
		return nil
	}
	c := &Chart{Title: fmt.Sprintf("(k) Tollgate RSS during the soak (%.0f streams/s)", sk.Rate), XLabel: "seconds", YLabel: "RSS (MB)"}
	se := Series{Name: "tollgate RSS", Color: palette[1]}
	for _, s := range sk.Samples {
		se.X, se.Y = append(se.X, s.T), append(se.Y, s.MB)
	}
	c.Series = append(c.Series, se)
	return c
}

// write puts REPORT.md, results.json and the charts into dir.
func (r *Results) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	charts := r.charts()
	r.Charts = r.Charts[:0]
	for name, c := range charts {
		if err := os.WriteFile(filepath.Join(dir, name), c.SVG(), 0o644); err != nil {
			return err
		}
		r.Charts = append(r.Charts, name)
	}
	sort.Strings(r.Charts)
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "REPORT.md"), r.markdown(charts), 0o644)
}

func (r *Results) markdown(charts map[string]*Chart) []byte {
	var b bytes.Buffer
	pf := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	mode := "full"
	if r.Config.Quick {
		mode = "quick"
	}
	pf("# Tollgate benchmark — %s (%s)\n\n", r.Date, mode)
	pf("Generated by `%s` (see [e2e/bench/README.md](../../README.md)). Every scenario ran direct to `mockllm` and through one Tollgate node in the same run, alternating, %d time(s) each; figures are medians over the repetitions (errors are totals). Latency is from the send (closed loop) or from the *intended* send time (open loop) to the last byte of a validated answer.\n\n", r.Command, r.Config.Reps)

	pf("## Machine\n\n| | |\n|---|---|\n")
	pf("| CPU | %s |\n| cores (nproc) | %d (GOMAXPROCS of the harness %d) |\n| memory | %d MB |\n| kernel | %s |\n| Go | %s |\n| commit | %s |\n",
		r.Machine.CPUModel, r.Machine.NProc, r.Machine.GOMAXPROCS, r.Machine.MemTotalMB, r.Machine.Kernel, r.Machine.GoVersion, r.Machine.Commit)
	pf("| tollgate build | `%s` |\n", r.Machine.Build)
	pf("| pinning | %s |\n| load average at start / end | %s / %s |\n", r.Pinning.Note, r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd)
	pf("| phases | warm-up %v, measurement %v, open loop (d) %v, per rate (e) %v, soak %v; %d repetition(s) |\n",
		r.Config.Warmup, r.Config.Dur, r.Config.OpenDur, r.Config.RateDur, r.Config.SoakDur, r.Config.Reps)
	pf("| started / took | %s / %.0f s |\n\n", r.Started.Format(time.RFC3339), r.Seconds)
	pf("Gateway, mock and load generator share this machine: on few cores they compete for CPU, so a throughput ratio is a same-run, same-box figure, not the gateway's capacity alone. The load average shows how busy the box was besides.\n\n")

	pf("## Targets of issue 7\n\n| scenario | target | measured | result |\n|---|---|---|---|\n")
	for _, c := range r.Targets {
		res := c.Status
		if res != "not run" {
			res = "**" + res + "**"
		}
		pf("| (%s) | %s | %s | %s |\n", c.Scenario, c.Target, c.Measured, res)
	}
	pf("\n")
	for _, n := range r.Notes {
		pf("> %s\n\n", n)
	}
	r.mdRatios(&b)

	order := []string{"j", "a", "b", "c", "d", "e", "f", "g", "h", "i", "k"}
	for _, id := range order {
		switch id {
		case "j":
			if r.Footprint != nil {
				r.mdFootprint(&b)
			}
			continue
		case "k":
			if r.Soak != nil {
				r.mdSoak(&b, charts)
			}
			continue
		}
		if s := r.scenario(id); s != nil {
			r.mdScenario(&b, s, charts)
		}
	}

	pf("## How to read this report\n\n")
	pf("- *direct* is the load generator talking to `mockllm`; *tollgate* is the same request through the gateway to the same mock. *added* is tollgate minus direct, per percentile (a difference of percentiles, not a percentile of differences; small negative values are noise).\n")
	pf("- *ratio* is tollgate req/s ÷ direct req/s measured in the same run. *gw CPU* is the gateway's user+system CPU (from `/proc/PID/stat`) in cores over the measurement; *req/core-s* is tollgate requests per gateway CPU-second. *gw RSS* is the peak of `VmRSS` sampled every second.\n")
	pf("- Every answer is validated (status 200, JSON shape, for streams exactly the expected chunks and `[DONE]`); a failed one counts as an error and not in the latency figures.\n")
	pf("- In open-loop runs *send lag* is how late the load generator sent against the schedule; when it is large the generator, not the target, fell behind (its delay still counts in the latency, measured from the intended time).\n")
	return b.Bytes()
}

func (r *Results) mdScenario(b *bytes.Buffer, s *Scenario, charts map[string]*Chart) {
	pf := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pf("## (%s) %s\n\n%s\n\n", s.ID, s.Title, s.What)
	if len(s.Points) == 0 {
		pf("No measurements (interrupted).\n\n")
		return
	}
	open := s.ID == "d" || s.ID == "e"
	pf("| point | target | req/s | p50 | p90 | p99 | p99.9 | errors | gw CPU | mock / load CPU | gw RSS |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range s.Points {
		for _, rr := range append([]*RunResult{p.Direct, p.Gateway}, p.refRuns()...) {
			if rr == nil {
				continue
			}
			cpu := fmt.Sprintf("%.2f", rr.Usage.GatewayCPU)
			if rr == p.Gateway && rr.Usage.GatewayCPU > 0 {
				cpu += fmt.Sprintf(" (%.0f req/core-s)", rr.Throughput/rr.Usage.GatewayCPU)
			}
			pf("| %s | %s | %.0f | %s | %s | %s | %s | %d | %s | %.2f / %.2f | %.1f MB |\n", p.Label, rr.Target, rr.Throughput,
				fmtUS(rr.Lat.P50), fmtUS(rr.Lat.P90), fmtUS(rr.Lat.P99), fmtUS(rr.Lat.P999), rr.Errors, cpu,
				rr.Usage.MockCPU, rr.Usage.LoadCPU, rr.Usage.GatewayRSS)
		}
		if p.Direct != nil && p.Gateway != nil {
			a := p.AddedLat
			pf("| %s | **added / ratio** | **×%.2f** | **%s** | %s | **%s** | %s | | | | |\n", p.Label, p.Ratio,
				fmtAdded(a.P50), fmtAdded(a.P90), fmtAdded(a.P99), fmtAdded(a.P999))
			for _, rr := range p.refRuns() {
				a := diff(rr.Lat, p.Direct.Lat)
				pf("| %s | %s added / ratio | ×%.2f | %s | %s | %s | %s | | | | |\n", p.Label, rr.Target, rr.Throughput/max(p.Direct.Throughput, 1e-9),
					fmtAdded(a.P50), fmtAdded(a.P90), fmtAdded(a.P99), fmtAdded(a.P999))
			}
		}
	}
	pf("\n")
	if s.Points[0].AddedTTFT != nil {
		pf("Time to first chunk and gap between chunks:\n\n| point | target | TTFT p50 | TTFT p90 | TTFT p99 | gap p50 | gap p99 | gap p99.9 |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, p := range s.Points {
			if p.Direct == nil || p.Gateway == nil || p.AddedTTFT == nil {
				continue
			}
			for _, rr := range append([]*RunResult{p.Direct, p.Gateway}, p.refRuns()...) {
				if rr.TTFT == nil || rr.Gap == nil {
					continue
				}
				pf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", p.Label, rr.Target, fmtUS(rr.TTFT.P50), fmtUS(rr.TTFT.P90), fmtUS(rr.TTFT.P99),
					fmtUS(rr.Gap.P50), fmtUS(rr.Gap.P99), fmtUS(rr.Gap.P999))
			}
			t, g := p.AddedTTFT, p.AddedGap
			pf("| %s | **added** | **%s** | %s | %s | %s | **%s** | %s |\n", p.Label, fmtAdded(t.P50), fmtAdded(t.P90), fmtAdded(t.P99),
				fmtAdded(g.P50), fmtAdded(g.P99), fmtAdded(g.P999))
		}
		pf("\n")
	}
	if open {
		pf("Load generator send lag (actual − intended send time), p99: ")
		var parts []string
		for _, p := range s.Points {
			if p.Direct != nil && p.Gateway != nil && p.Direct.SendLag != nil && p.Gateway.SendLag != nil {
				parts = append(parts, fmt.Sprintf("%s direct %s, tollgate %s", p.Label, fmtUS(p.Direct.SendLag.P99), fmtUS(p.Gateway.SendLag.P99)))
			}
		}
		pf("%s.\n\n", strings.Join(parts, "; "))
	}
	mdErrors(b, s.Points)
	for _, name := range []string{"latency-" + s.ID + ".svg"} {
		if _, ok := charts[name]; ok {
			pf("![%s](%s)\n\n", name, name)
		}
	}
	if s.ID == "b" || (s.ID == "a" && r.scenario("b") == nil) {
		if _, ok := charts["throughput.svg"]; ok {
			pf("![throughput](throughput.svg)\n\n")
		}
	}
	for _, n := range s.Notes {
		pf("> %s\n\n", n)
	}
}

func mdErrors(b *bytes.Buffer, ps []*Point) {
	var lines []string
	for _, p := range ps {
		for _, rr := range append([]*RunResult{p.Direct, p.Gateway}, p.refRuns()...) {
			if rr == nil {
				continue
			}
			for msg, n := range rr.ErrSamples {
				lines = append(lines, fmt.Sprintf("- %s, %s: %d× `%s`", p.Label, rr.Target, n, strings.ReplaceAll(msg, "`", "'")))
			}
		}
	}
	if len(lines) > 0 {
		sort.Strings(lines)
		fmt.Fprintf(b, "Errors (samples of distinct messages):\n\n%s\n\n", strings.Join(lines, "\n"))
	}
}

func (r *Results) mdFootprint(b *bytes.Buffer) {
	fp := r.Footprint
	pf := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pf("## (j) Footprint\n\n%s\n\n| figure | value |\n|---|---:|\n", scenarioInfo[0].What)
	pf("| `tollgate` binary, as measured | %.1f MB (a plain `go build`: %.1f MB) |\n", fp.BinaryMB, fp.DevMB)
	pf("| `mockllm` binary | %.1f MB |\n", fp.MockMB)
	pf("| RSS at rest (fresh node, routes and key configured) | %.1f MB |\n", fp.RSSRestMB)
	if fp.RSSRestRestartMB > 0 {
		pf("| RSS at rest after a restart | %.1f MB |\n", fp.RSSRestRestartMB)
	}
	if fp.RSSAfterLoadMB > 0 {
		pf("| RSS at rest after all load scenarios | %.1f MB |\n", fp.RSSAfterLoadMB)
	}
	if fp.RSSMinuteAfterLoadMB > 0 {
		pf("| RSS %.0f s after the last load scenario | %.1f MB |\n", fp.RestAfterLoadS, fp.RSSMinuteAfterLoadMB)
	}
	pf("| first start to ready (fresh data dir) | %.0f ms |\n", fp.FirstReadyMS)
	if len(fp.ReadyMS) > 0 {
		var xs []string
		for _, v := range fp.ReadyMS {
			xs = append(xs, fmt.Sprintf("%.0f", v))
		}
		pf("| restart to ready (existing data dir), median | %.0f ms (runs: %s ms) |\n", fp.ReadyMedianMS, strings.Join(xs, ", "))
	}
	if p := r.point("c", 32); p != nil {
		pf("| RSS under (c), peak | %.1f MB |\n", p.Gateway.Usage.GatewayRSS)
	}
	pf("\nTime to ready is from process start (fork/exec) to the first `/readyz` 200, polled every 2 ms, after SIGTERM of the previous process.\n\n")
}

func (r *Results) mdSoak(b *bytes.Buffer, charts map[string]*Chart) {
	sk := r.Soak
	pf := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	info := scenarioInfo[len(scenarioInfo)-1]
	pf("## (k) %s\n\n%s\n\n", info.Title, info.What)
	rr := sk.Result
	pf("| figure | value |\n|---|---:|\n")
	pf("| offered | %.0f streams/s for %.0f s |\n| answered | %.0f streams/s, %d ok, %d errors |\n", sk.Rate, sk.Dur, rr.Throughput, rr.OK, rr.Errors)
	pf("| stream latency p50 / p99 / p99.9 | %s / %s / %s |\n", fmtUS(rr.Lat.P50), fmtUS(rr.Lat.P99), fmtUS(rr.Lat.P999))
	if rr.TTFT != nil {
		pf("| time to first chunk p50 / p99 | %s / %s |\n", fmtUS(rr.TTFT.P50), fmtUS(rr.TTFT.P99))
	}
	pf("| gateway CPU | %.2f cores |\n", rr.Usage.GatewayCPU)
	pf("| RSS first / last / peak | %.1f / %.1f / %.1f MB |\n", sk.FirstMB, sk.LastMB, rr.Usage.GatewayRSS)
	pf("| warm-up before measuring (unrecorded) | %.0f s |\n", sk.Warmup)
	pf("| RSS growth (least-squares slope over the measured samples) | %+.2f MB/min |\n", sk.SlopeMBPerMin)
	pf("| RSS growth over the second half only | %+.2f MB/min |\n\n", sk.LateMBPerMin)
	if sk.Dur < 60 {
		pf("A soak this short can end inside the node's warm-up (the ledger's first memtables fill for tens of seconds at this rate). The second-half slope and the 2-minute soak of the full run tell a bounded warm-up from a leak.\n\n")
	}
	mdErrors(b, []*Point{{Label: "soak", Gateway: rr}})
	if _, ok := charts["rss-soak.svg"]; ok {
		pf("![rss-soak](rss-soak.svg)\n\n")
	}
}
