package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// GC cycles during a scale step's creates. At a million keys one cycle
// marks a heap of about a gigabyte, which costs more CPU than thousands
// of creates: whether one falls inside a short run of creates moves their
// CPU per create by several times. The count, read from the node's own
// go_gc_duration_seconds_count before and after, says which kind of run a
// figure comes from; a run of many creates spans several cycles and gives
// the steady figure.

// gcCycles is the number of GC cycles process g has completed, from its
// /metrics.
func gcCycles(g *Gateway) (uint64, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + g.HTTP + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return parseGCCycles(io.LimitReader(resp.Body, 64<<20))
}

// parseGCCycles finds go_gc_duration_seconds_count in a Prometheus text
// exposition.
func parseGCCycles(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("go_gc_duration_seconds_count ")); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(string(v)), 64)
			if err != nil {
				return 0, fmt.Errorf("go_gc_duration_seconds_count %q: %w", v, err)
			}
			return uint64(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no go_gc_duration_seconds_count in /metrics")
}

// gcEach reads gcCycles of every node (0 where it cannot).
func (sc *scaleSet) gcEach() []uint64 { return sc.each(gcCycles) }

// writeGCCycles writes each step's GC cycles during the creates.
func writeGCCycles(b *strings.Builder, steps []*ScaleStep) {
	writePerNode(b, steps, "GC cycles during the creates (from each node's go_gc_duration_seconds_count)",
		" At a million keys one cycle costs more CPU than thousands of creates, so a short run that holds one, or none, "+
			"gives a figure far from the steady one; a run spanning several cycles gives the steady figure.",
		func(n NodeFigures) string { return fmt.Sprint(n.GCCycles) })
}
