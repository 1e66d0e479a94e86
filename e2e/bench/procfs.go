package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// parseStatTicks returns utime+stime (clock ticks) from the text of
// /proc/PID/stat. The command name (field 2) is in parentheses and may
// hold spaces, so fields are counted from the last ')'.
func parseStatTicks(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' in stat line")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line has %d fields after the name", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad utime/stime %q %q", f[11], f[12])
	}
	return ut + st, nil
}

// parseRSSKB returns VmRSS in kB from the text of /proc/PID/status.
func parseRSSKB(status []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.ParseUint(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS line")
}

// cpuTicks is the CPU time (user+system, clock ticks) of process pid.
func cpuTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatTicks(b)
}

// rssMB is the resident set size of process pid in MiB.
func rssMB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	kb, err := parseRSSKB(b)
	return float64(kb) / 1024, err
}

// clockTicks is USER_HZ, from getconf (100 on every usual Linux).
var clockTicks = sync.OnceValue(func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return float64(n)
		}
	}
	return 100
})

// RSSSample is one reading of the gateway's RSS.
type RSSSample struct {
	T  float64 `json:"t_s"` // seconds since the measurement began
	MB float64 `json:"rss_mb"`
}

// Usage is the resources used during one measurement.
type Usage struct {
	GatewayCPU   float64     `json:"gateway_cpu_cores"` // average cores (1.0 = one core busy)
	MockCPU      float64     `json:"mock_cpu_cores"`
	LoadCPU      float64     `json:"loadgen_cpu_cores"`
	GatewayRSS   float64     `json:"gateway_rss_max_mb"`
	GatewayRSSAv float64     `json:"gateway_rss_mean_mb"`
	Samples      []RSSSample `json:"rss_samples,omitempty"`
}

// Monitor samples the gateway's and mock's CPU time and the gateway's RSS
// from /proc while a measurement runs: CPU as the utime+stime delta over
// the measurement, RSS every Interval. A nil Monitor does nothing.
type Monitor struct {
	Gateway  func() int // current gateway pid (it changes on restarts)
	Mock     int
	Interval time.Duration
	Keep     bool // keep every RSS sample in Usage.Samples

	start            time.Time
	gw0, mock0, lg0  uint64
	gwPid            int
	stop             chan struct{}
	done             chan struct{}
	mu               sync.Mutex
	samples          []RSSSample
	sampleErr        error
	rssMax, rssTotal float64
}

func (m *Monitor) Begin() {
	if m == nil {
		return
	}
	m.gwPid = m.Gateway()
	m.start = time.Now()
	m.gw0, _ = cpuTicks(m.gwPid)
	m.mock0, _ = cpuTicks(m.Mock)
	m.lg0, _ = cpuTicks(os.Getpid())
	m.samples = m.samples[:0]
	m.rssMax, m.rssTotal = 0, 0
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	m.sample()
	go func() {
		defer close(m.done)
		t := time.NewTicker(m.Interval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sample()
			}
		}
	}()
}

func (m *Monitor) sample() {
	mb, err := rssMB(m.gwPid)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.sampleErr = err
		return
	}
	m.samples = append(m.samples, RSSSample{T: time.Since(m.start).Seconds(), MB: mb})
	m.rssMax = max(m.rssMax, mb)
	m.rssTotal += mb
}

// End stops sampling and returns the usage since Begin.
func (m *Monitor) End() Usage {
	if m == nil {
		return Usage{}
	}
	close(m.stop)
	<-m.done
	m.sample()
	el := time.Since(m.start).Seconds()
	gw1, _ := cpuTicks(m.gwPid)
	mock1, _ := cpuTicks(m.Mock)
	lg1, _ := cpuTicks(os.Getpid())
	hz := clockTicks()
	cores := func(a, b uint64) float64 {
		if b < a || el <= 0 {
			return 0
		}
		return float64(b-a) / hz / el
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u := Usage{GatewayCPU: cores(m.gw0, gw1), MockCPU: cores(m.mock0, mock1), LoadCPU: cores(m.lg0, lg1), GatewayRSS: m.rssMax}
	if n := len(m.samples); n > 0 {
		u.GatewayRSSAv = m.rssTotal / float64(n)
	}
	if m.Keep {
		u.Samples = append([]RSSSample(nil), m.samples...)
	}
	return u
}
