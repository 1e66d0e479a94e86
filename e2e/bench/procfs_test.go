package main

import (
	"os"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "1234 (tollgate (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 123456 789 18446744073709551615\n"
	n, err := parseStatTicks([]byte(line))
	if err != nil || n != 325 {
		t.Fatalf("ticks %d, %v", n, err)
	}
	if _, err := parseStatTicks([]byte("1234 (short) S 1 2")); err == nil {
		t.Fatal("short line accepted")
	}
}

func TestParseRSS(t *testing.T) {
	status := "Name:\ttollgate\nVmPeak:\t  900000 kB\nVmRSS:\t   25600 kB\nThreads:\t9\n"
	kb, err := parseRSSKB([]byte(status))
	if err != nil || kb != 25600 {
		t.Fatalf("%d %v", kb, err)
	}
	if _, err := parseRSSKB([]byte("Name:\tx\n")); err == nil {
		t.Fatal("missing VmRSS accepted")
	}
}

func TestOwnProcess(t *testing.T) {
	pid := os.Getpid()
	t0, err := cpuTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Burn some CPU so the tick count moves (one tick is 10 ms).
	deadline := time.Now().Add(60 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	t1, err := cpuTicks(pid)
	if err != nil || t1 < t0 {
		t.Fatalf("ticks %d -> %d, %v (%d)", t0, t1, err, x)
	}
	mb, err := rssMB(pid)
	if err != nil || mb < 1 || mb > 4096 {
		t.Fatalf("own RSS %.1f MB, %v", mb, err)
	}
	if clockTicks() <= 0 {
		t.Fatal("clock ticks")
	}
	m := &Monitor{Gateway: os.Getpid, Mock: pid, Interval: 20 * time.Millisecond, Keep: true}
	m.Begin()
	time.Sleep(70 * time.Millisecond)
	u := m.End()
	if u.GatewayRSS < 1 || len(u.Samples) < 3 || u.GatewayCPU < 0 {
		t.Fatalf("monitor of own process: %+v", u)
	}
	var none *Monitor
	none.Begin()
	if u := none.End(); u.GatewayRSS != 0 {
		t.Fatal("nil monitor")
	}
}
