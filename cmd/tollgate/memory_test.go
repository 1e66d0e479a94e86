package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestMemorySettingsReadPercentsAndSizes(t *testing.T) {
	for _, c := range []struct {
		gc, limit string
		wantGC    int
		wantLimit int64
	}{
		{"100", "off", 100, math.MaxInt64},
		{"50", "512MiB", 50, 512 << 20},
		{"off", "2GiB", -1, 2 << 30},
		{"200", "800MB", 200, 800e6},
		{"100", "0", 100, math.MaxInt64},
		{"100", "67108864", 100, 64 << 20},
	} {
		m := memoryFlags{gcPercent: c.gc, limit: c.limit}
		gc, limit, err := m.settings()
		if err != nil || gc != c.wantGC || limit != c.wantLimit {
			t.Errorf("%q %q: %d %d %v, want %d %d", c.gc, c.limit, gc, limit, err, c.wantGC, c.wantLimit)
		}
	}
}

func TestMemorySettingsRefuseNonsense(t *testing.T) {
	for _, c := range [][2]string{{"0", "off"}, {"-5", "off"}, {"fast", "off"}, {"100", "1MiB"}, {"100", "lots"}, {"100", "-1GiB"}, {"off", "off"}} {
		m := memoryFlags{gcPercent: c[0], limit: c[1]}
		if _, _, err := m.settings(); err == nil {
			t.Errorf("%q %q accepted", c[0], c[1])
		}
	}
}

func TestAutoMemoryLimitIsNinetyPercentOfTheCgroupsLimit(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "memory.max")
	if err := os.WriteFile(p, []byte("1073741824\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := autoLimit(p); got != 966367641 {
		t.Errorf("limited cgroup: %d", got)
	}
	if err := os.WriteFile(p, []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := autoLimit(p); got != math.MaxInt64 {
		t.Errorf("unlimited cgroup: %d", got)
	}
	if got := autoLimit(filepath.Join(dir, "none")); got != math.MaxInt64 {
		t.Errorf("no cgroup file: %d", got)
	}
}

func TestMemoryFlagsReachTheRuntime(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	m := memoryFlags{gcPercent: "75", limit: "1GiB"}
	if err := m.apply(); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(75); got != 75 {
		t.Errorf("GC percent %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("memory limit %d", got)
	}
}
