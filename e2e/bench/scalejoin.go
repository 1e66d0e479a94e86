package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The join of one more node at a scale run's last step (issue 12: "join
// to ready <= 30 s at 1M keys"): a cluster run always times it; a
// single-node run does with -scale-join, the node then becoming a
// cluster of two.

// Ways a joiner caught up, as JoinHow reports them.
const (
	joinSnapshot = "installed a snapshot"
	joinReplay   = "replayed the leader's log"
)

// join starts one more node with --join on a fresh data dir and times it
// to /readyz 200. It reads the joiner's CPU and RSS when it turned ready,
// the leader's CPU over the same time (the snapshot it took or sent), and
// whether the joiner installed one of the leader's snapshots or replayed
// the leader's log.
func (sc *scaleSet) join(st *ScaleStep, logf func(string, ...any)) error {
	leader, err := sc.leader()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("n%d", len(sc.nodes)+1)
	g, err := sc.newNode(name)
	if err != nil {
		return err
	}
	g.Extra = append(g.Extra, "--join", leader.Gossip)
	sc.nodes, sc.names = append(sc.nodes, g), append(sc.names, name)
	before := loadAvg()
	l0, err := cpuTicks(leader.Pid())
	if err != nil {
		return err
	}
	d, err := g.Start()
	if err != nil {
		return fmt.Errorf("join of %s at %d keys: %w", name, st.Keys, err)
	}
	if l1, err := cpuTicks(leader.Pid()); err == nil {
		st.JoinLeaderCPUMs = float64(l1-l0) * 1000 / clockTicks()
	}
	st.JoinMs = float64(d) / 1e6
	st.JoinLoadAvg = before + " / " + loadAvg()
	st.JoinCPUMs = startCPUMs(g)
	st.JoinRSSMB, _ = rssMB(g.Pid())
	if err := sc.dial(g); err != nil {
		return err
	}
	st.JoinHow = joinHow(snapshotIndexes(snapshotDir(g)), snapshotIndexes(snapshotDir(leader)))
	logf("scale: %s joined at %d keys: ready in %.0f ms (CPU %.0f ms, RSS %.0f MB; leader CPU %.0f ms), %s",
		name, st.Keys, st.JoinMs, st.JoinCPUMs, st.JoinRSSMB, st.JoinLeaderCPUMs, st.JoinHow)
	return nil
}

func snapshotDir(g *Gateway) string { return filepath.Join(g.dir, "raft", "snapshots") }

// snapshotIndexes are the Raft indexes of the snapshots kept in dir (a
// Raft file snapshot store: one folder per snapshot with a meta.json);
// folders without a readable meta.json are skipped.
func snapshotIndexes(dir string) []uint64 {
	ents, _ := os.ReadDir(dir)
	var out []uint64
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var meta struct{ Index uint64 }
		if json.Unmarshal(b, &meta) == nil && meta.Index > 0 {
			out = append(out, meta.Index)
		}
	}
	return out
}

// joinHow tells how a joiner caught up: it installed a snapshot when it
// keeps one at the index of one the leader keeps (a snapshot it took
// itself after replaying the log would be at its own applied index).
func joinHow(joiner, leader []uint64) string {
	for _, i := range joiner {
		if slices.Contains(leader, i) {
			return joinSnapshot
		}
	}
	return joinReplay
}

// writeJoin writes the sentence on a step's join, if it had one.
func writeJoin(b *strings.Builder, s *ScaleStep) {
	if s.JoinMs <= 0 {
		return
	}
	fmt.Fprintf(b, "\nAt %d keys one more node joined (--join, fresh data dir): ready %.0f ms after its start; it %s.\n", s.Keys, s.JoinMs, s.JoinHow)
	if s.JoinCPUMs > 0 {
		fmt.Fprintf(b, "The joiner had used %.0f ms of CPU and held %.0f MB RSS when it turned ready; the leader used %.0f ms of CPU meanwhile.\n",
			s.JoinCPUMs, s.JoinRSSMB, s.JoinLeaderCPUMs)
	}
	if s.JoinLoadAvg != "" {
		fmt.Fprintf(b, "Load average (1, 5, 15 min) before / after the join: %s.\n", s.JoinLoadAvg)
	}
	fmt.Fprintf(b, "Target: ready ≤ 30 s (%s).\n", metWord(s.JoinMs <= 30_000))
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
