package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profiler fetches Go profiles from a node started with --pprof-addr. A
// nil profiler does nothing.
type profiler struct {
	addr, dir string
}

func newProfiler(dir string) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return &profiler{addr: addr, dir: dir}, nil
}

// cpu starts a CPU profile of d (whole seconds, at least one) and writes
// it to name; the channel gets the outcome when it is done.
func (p *profiler) cpu(name string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	if p == nil {
		done <- nil
		return done
	}
	secs := max(1, int(d/time.Second))
	go func() { done <- p.fetch(fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), name, d+30*time.Second) }()
	return done
}

// heap writes a heap profile (after a GC) to name.
func (p *profiler) heap(name string) error {
	if p == nil {
		return nil
	}
	return p.fetch("/debug/pprof/heap?gc=1", name, time.Minute)
}

func (p *profiler) fetch(path, name string, timeout time.Duration) error {
	c := &http.Client{Timeout: timeout}
	resp, err := c.Get("http://" + p.addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	f, err := os.Create(filepath.Join(p.dir, name))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profiled runs run; on the node's first repetition of (c) and of (b) at
// StreamRatioClients it keeps a CPU profile and an allocation profile
// (allocs?seconds: only what the run allocated) of the measurement.
func (b *bench) profiled(scn string, param float64, rep int, gateway bool, run func() *RunResult) *RunResult {
	if b.prof == nil || !gateway || rep != 0 || !(scn == "c" || scn == "b" && param == StreamRatioClients) {
		return run()
	}
	name := fmt.Sprintf("%s-%.0f", scn, param)
	d := b.cfg.Warmup + b.cfg.Dur
	cpu := b.prof.cpu("cpu-"+name+".pprof", d)
	allocs := make(chan error, 1)
	go func() {
		allocs <- b.prof.fetch(fmt.Sprintf("/debug/pprof/allocs?seconds=%d", max(1, int(d/time.Second))), "allocs-"+name+".pprof", d+30*time.Second)
	}()
	r := run()
	for _, c := range []<-chan error{cpu, allocs} {
		if err := <-c; err != nil {
			b.logf("  (%s) profile: %v", scn, err)
		}
	}
	title := fmt.Sprintf("Tollgate's CPU by hop, (%s) at %.0f clients", scn, param)
	if err := writeBreakdown(filepath.Join(b.prof.dir, "cpu-"+name+".pprof"), filepath.Join(b.prof.dir, "breakdown-"+name+".md"), title, answersOf(r, d)); err != nil {
		b.logf("  (%s) profile breakdown: %v", scn, err)
	}
	return r
}
