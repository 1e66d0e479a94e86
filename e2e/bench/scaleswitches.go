package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// contextSwitches is how many times the threads of process pid have been
// switched out, voluntarily (to wait: a futex, a sleep, I/O) or not, from
// /proc/PID/task/*/status. A key create on a node otherwise idle wakes
// several threads and the Go runtime's monitor, and on a virtual machine
// each switch costs several µs: a share of a create's CPU that a CPU
// profile does not show (the monitor thread is never sampled).
func contextSwitches(pid int) (uint64, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "status"))
		if err != nil {
			continue // the thread exited
		}
		n += parseSwitches(b)
	}
	return n, nil
}

// parseSwitches adds the voluntary and involuntary context switches of
// one /proc status file.
func parseSwitches(status []byte) uint64 {
	var n uint64
	for line := range bytes.SplitSeq(status, []byte{'\n'}) {
		for _, key := range [][]byte{[]byte("voluntary_ctxt_switches:"), []byte("nonvoluntary_ctxt_switches:")} {
			if v, ok := bytes.CutPrefix(line, key); ok {
				c, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
				if err == nil {
					n += c
				}
			}
		}
	}
	return n
}

// switchesEach reads contextSwitches of every node (0 where it cannot).
func (sc *scaleSet) switchesEach() []uint64 {
	return sc.each(func(g *Gateway) (uint64, error) { return contextSwitches(g.Pid()) })
}

// each reads one figure of every node (0 where it cannot).
func (sc *scaleSet) each(read func(*Gateway) (uint64, error)) []uint64 {
	out := make([]uint64, len(sc.nodes))
	for i, g := range sc.nodes {
		out[i], _ = read(g)
	}
	return out
}

// writeSwitches writes each step's context switches per create.
func writeSwitches(b *strings.Builder, steps []*ScaleStep) {
	writePerNode(b, steps, "Context switches per create (every thread of the node, from /proc)", "",
		func(n NodeFigures) string { return fmt.Sprintf("%.1f", n.SwitchesPerCreate) })
}

// writePerNode writes one line "label: node at K keys FIGURE; ... .tail"
// over every step and node, or nothing without nodes.
func writePerNode(b *strings.Builder, steps []*ScaleStep, label, tail string, figure func(NodeFigures) string) {
	var parts []string
	for _, s := range steps {
		for _, n := range s.Nodes {
			parts = append(parts, fmt.Sprintf("%s at %d keys %s", n.Node, s.Keys, figure(n)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "\n%s: %s.%s\n", label, strings.Join(parts, "; "), tail)
	}
}
