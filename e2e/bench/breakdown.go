package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// hop is one part of the node's work per answer, recognised by a function
// on a sample's stack. A sample goes to the first hop (in this order)
// that any of its frames matches.
type hop struct {
	name  string
	funcs []string // substrings of function names
}

var hops = []hop{
	{"garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcStart", "runtime.markroot"}},
	{"ledger write (journal, Pebble)", []string{"tollgate/ledger.", "node.ledgerRecorder", "cockroachdb/pebble"}},
	{"upstream client (HTTP/1.1 to the mock)", []string{"proxy.(*Transport)", "proxy.(*h1Conn)", "proxy.(*h1Body)", "proxy.(*h1Pool)", "proxy.newUpstreamRequest"}},
	{"auth, rate limits, budget", []string{"proxy.authenticate", "proxy.(*Handler).admit", "proxy.(*Handler).reserve", "tollgate/ratelimit.", "node/budget."}},
	{"request and answer checks (scan, rewrite, validate, usage)", []string{"routing.ScanRequest", "proxy.validAnswer", "routing.UsageFromBody", "routing.Rewrite", "proxy.(*Handler).readBodyIn", "routing.ChunkUsage"}},
	{"recording (metrics, pricing)", []string{"proxy.(*Handler).commit", "proxy.(*Metrics)"}},
	{"stream relay (events to the client)", []string{"proxy.(*Handler).relay", "proxy.(*lineCodec)", "proxy.(*clientWriter)"}},
	{"our handler, the rest", []string{"tollgate/node/proxy."}},
	{"net/http server (parse, write, connection)", []string{"net/http."}},
	{"Go scheduler and the rest of the runtime", []string{"runtime."}},
}

// hopShare is one hop's CPU in a profile.
type hopShare struct {
	Name    string  `json:"hop"`
	Seconds float64 `json:"seconds"`
	Share   float64 `json:"share"`
}

// breakdown sorts the samples of `go tool pprof -traces` output into hops;
// what matches none is "other".
func breakdown(traces io.Reader) ([]hopShare, float64, error) {
	by := make([]float64, len(hops)+1)
	var total, value float64
	var stack []string
	flush := func() {
		if value > 0 {
			by[classify(stack)] += value
			total += value
		}
		value, stack = 0, stack[:0]
	}
	sc := bufio.NewScanner(traces)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && value == 0 && len(stack) == 0:
			d, err := time.ParseDuration(f[0])
			if err != nil {
				continue // a header line
			}
			value, stack = d.Seconds(), append(stack, f[1])
		case len(f) >= 1 && value > 0:
			stack = append(stack, f[0])
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	var out []hopShare
	for i, s := range by {
		name := "other"
		if i < len(hops) {
			name = hops[i].name
		}
		if s > 0 && total > 0 {
			out = append(out, hopShare{Name: name, Seconds: s, Share: s / total})
		}
	}
	return out, total, nil
}

func classify(stack []string) int {
	for i, h := range hops {
		for _, fn := range stack {
			for _, m := range h.funcs {
				if strings.Contains(fn, m) {
					return i
				}
			}
		}
	}
	return len(hops)
}

// writeBreakdown reads a CPU profile with `go tool pprof` and writes its
// breakdown by hop, per answer when answers > 0, and its top functions by
// cumulative time, to md.
func writeBreakdown(profile, md, title string, answers float64) error {
	traces, err := exec.Command("go", "tool", "pprof", "-traces", profile).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof -traces %s: %w", profile, err)
	}
	shares, total, err := breakdown(bytes.NewReader(traces))
	if err != nil {
		return err
	}
	top, _ := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=40", profile).Output()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n%.2f s of CPU samples", title, total)
	if answers > 0 {
		fmt.Fprintf(&b, " for %.0f answers: %s of CPU per answer", answers, fmtUS(total/answers*1e6))
	}
	fmt.Fprintf(&b, ". Each sample counts once, for the first hop (in this order) one of its frames belongs to.\n\n| hop | CPU s | share |")
	if answers > 0 {
		b.WriteString(" per answer |")
	}
	b.WriteString("\n|---|---:|---:|")
	if answers > 0 {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, s := range shares {
		fmt.Fprintf(&b, "| %s | %.2f | %.1f%% |", s.Name, s.Seconds, 100*s.Share)
		if answers > 0 {
			fmt.Fprintf(&b, " %s |", fmtUS(s.Seconds/answers*1e6))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nTop functions by cumulative time (`go tool pprof -top -cum`):\n\n```\n%s```\n", top)
	return os.WriteFile(md, b.Bytes(), 0o644)
}

// answersOf is the answers a profiled run produced over its profile's
// length (throughput × seconds).
func answersOf(r *RunResult, d time.Duration) float64 {
	return r.Throughput * float64(max(1, int(d/time.Second)))
}
