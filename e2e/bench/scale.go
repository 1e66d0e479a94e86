package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// The scale scenario (issue 12): the control state as keys pile up. One
// node is filled with imported keys step by step; at each step the harness
// measures what a write costs the node (CPU per key create, from
// /proc/PID/stat), how long creates take, the node's memory, the size of
// a snapshot of the state, and how long the node takes to be ready again
// after SIGTERM and after kill -9.

// ScaleConfig bounds the scale run.
type ScaleConfig struct {
	Steps []int `json:"steps"` // total keys after each step
	// Creates is the most key creates measured per step; CreateTime
	// bounds them in time (creates are slow where writes cost O(n)).
	Creates    int           `json:"creates"`
	CreateTime time.Duration `json:"create_time_ns"`
	// CreateClients is how many callers create keys at once (each one
	// after another); 0 or 1: one.
	CreateClients int `json:"create_clients,omitempty"`
	// ProfileDir, when set, starts the node with --pprof-addr and keeps
	// there, per step, a CPU profile of the node over the creates
	// (cpu-KEYS.pprof, the creates then run for all of CreateTime) and a
	// heap profile after them (heap-KEYS.pprof).
	ProfileDir string `json:"profile_dir,omitempty"`
	// NodeEnv is more environment for the node, such as GOMEMLIMIT.
	NodeEnv []string `json:"node_env,omitempty"`
	Tag     string   `json:"tag,omitempty"` // the results folder is DATE-scale-TAG
	// Nodes is the cluster's size (0 or 1: one node).
	Nodes int `json:"nodes,omitempty"`
	// Chat, when its Dur is set, runs chat traffic with and without key
	// creates at the last step.
	Chat ChatConfig `json:"chat"`
	// Join times the join of one more node at the last step of a
	// single-node run too (a cluster run always does).
	Join bool `json:"join,omitempty"`
}

// ScaleStep is what one step measured.
type ScaleStep struct {
	Keys            int     `json:"keys"`
	ImportSeconds   float64 `json:"import_seconds"`    // importing this step's new keys
	ImportPerSecond float64 `json:"import_per_second"` // keys per second of that import
	Creates         int     `json:"creates"`
	CPUPerCreateMs  float64 `json:"cpu_per_create_ms"`
	CreateP50Ms     float64 `json:"create_p50_ms"`
	CreateP99Ms     float64 `json:"create_p99_ms"`
	RSSMB           float64 `json:"rss_mb"`      // right after the import and the creates
	RSSRestMB       float64 `json:"rss_rest_mb"` // 10 s after a restart on the same data dir
	SnapshotMB      float64 `json:"snapshot_mb"`
	DataDirMB       float64 `json:"data_dir_mb"`
	RestartTermMs   float64 `json:"restart_after_sigterm_ms"`
	RestartKillMs   float64 `json:"restart_after_kill9_ms"`
	// The CPU the restarted process had used when it turned ready (on a
	// busy machine the wall time above is mostly waiting for a core).
	RestartTermCPUMs float64 `json:"restart_after_sigterm_cpu_ms"`
	RestartKillCPUMs float64 `json:"restart_after_kill9_cpu_ms"`
	// In a cluster: the node restarted (a follower); every node's CPU
	// and RSS (CPUPerCreateMs and RSSMB above are the leader's); at the
	// last step the join of one more node, and how it caught up.
	Restarted string        `json:"restarted,omitempty"`
	Nodes     []NodeFigures `json:"nodes,omitempty"`
	JoinMs    float64       `json:"join_to_ready_ms,omitempty"`
	JoinHow   string        `json:"join_how,omitempty"`
	// The joiner's CPU and RSS when it turned ready, and the leader's
	// CPU from the joiner's start to then.
	JoinCPUMs       float64 `json:"join_cpu_ms,omitempty"`
	JoinRSSMB       float64 `json:"join_rss_mb,omitempty"`
	JoinLeaderCPUMs float64 `json:"join_leader_cpu_ms,omitempty"`
	JoinLoadAvg     string  `json:"join_loadavg,omitempty"` // before / after the join
	Err             string  `json:"error,omitempty"`
}

// NodeFigures are one node's figures at a step.
type NodeFigures struct {
	Node           string  `json:"node"`
	CPUPerCreateMs float64 `json:"cpu_per_create_ms"`
	// IdleCores is the node's CPU at rest just before the creates;
	// NetCPUPerCreateMs is CPUPerCreateMs less that rest's share.
	IdleCores         float64 `json:"idle_cores"`
	NetCPUPerCreateMs float64 `json:"net_cpu_per_create_ms"`
	// SwitchesPerCreate is the context switches of all the node's
	// threads over the creates, per create (contextSwitches).
	SwitchesPerCreate float64 `json:"switches_per_create"`
	// GCCycles is how many GC cycles the node ran during the creates
	// (scalegc.go).
	GCCycles uint64  `json:"gc_cycles"`
	RSSMB    float64 `json:"rss_mb"`
}

// nodeCPU is the CPU per create of each node, for the log and report.
func (s *ScaleStep) nodeCPU() string {
	var parts []string
	for _, n := range s.Nodes {
		if len(s.Nodes) == 1 {
			return fmt.Sprintf("%.3f (net %.3f)", n.CPUPerCreateMs, n.NetCPUPerCreateMs)
		}
		parts = append(parts, fmt.Sprintf("%s %.3f (net %.3f)", n.Node, n.CPUPerCreateMs, n.NetCPUPerCreateMs))
	}
	return strings.Join(parts, " / ")
}

// ScaleResults is the report of a scale run.
type ScaleResults struct {
	Date    string       `json:"date"`
	Command string       `json:"command"`
	Machine Machine      `json:"machine"`
	Config  ScaleConfig  `json:"config"`
	Steps   []*ScaleStep `json:"steps"`
	Chat    *ChatFigures `json:"chat,omitempty"`
	Seconds float64      `json:"seconds"`
}

// scaleSecret is the secret of the i-th imported key: the harness keeps
// secrets, so the import needs no file of drawn secrets.
func scaleSecret(i int) string { return fmt.Sprintf("sk-scale-%012d-0123456789", i) }

// runScale runs the scale scenario on fresh nodes (one, or a cluster of
// cfg.Nodes) and fills res step by step.
func runScale(bin *Binaries, tmp string, cfg ScaleConfig, res *ScaleResults, logf func(string, ...any)) error {
	sc, err := startScaleNodes(bin, tmp, cfg)
	if err != nil {
		return err
	}
	defer sc.stop()
	defer func() { res.Machine.LoadAvgEnd = loadAvg() }()
	have := 0
	for i, n := range cfg.Steps {
		st := &ScaleStep{Keys: n}
		res.Steps = append(res.Steps, st)
		err := sc.step(cfg, st, have, logf)
		last := i == len(cfg.Steps)-1
		if err == nil && last && cfg.Chat.Dur > 0 {
			res.Chat, err = sc.chat(cfg.Chat, n, logf)
		}
		if err == nil && last && (len(sc.nodes) > 1 || cfg.Join) {
			err = sc.join(st, logf)
		}
		if err != nil {
			st.Err = err.Error()
			return err
		}
		have = n
	}
	return nil
}

// step fills the state up to st.Keys keys (from have) and measures it.
func (sc *scaleSet) step(cfg ScaleConfig, st *ScaleStep, have int, logf func(string, ...any)) error {
	leader, err := sc.leader()
	if err != nil {
		return err
	}
	if st.Keys > have {
		t0 := time.Now()
		if err := scaleImport(leader, sc.tmp, have, st.Keys); err != nil {
			return err
		}
		st.ImportSeconds = time.Since(t0).Seconds()
		st.ImportPerSecond = float64(st.Keys-have) / st.ImportSeconds
	}
	logf("scale: %d keys (import %.1f s)", st.Keys, st.ImportSeconds)
	idle := sc.settle()
	cpuDone := sc.prof.cpu(fmt.Sprintf("cpu-%d.pprof", st.Keys), cfg.CreateTime)
	if err := sc.creates(leader, cfg, st, idle); err != nil {
		return err
	}
	if err := <-cpuDone; err != nil {
		logf("scale: CPU profile at %d keys: %v", st.Keys, err)
	}
	for i, g := range sc.nodes {
		st.Nodes[i].RSSMB, _ = rssMB(g.Pid())
	}
	st.RSSMB = st.Nodes[sc.index(leader)].RSSMB
	if err := sc.prof.heap(fmt.Sprintf("heap-%d.pprof", st.Keys)); err != nil {
		logf("scale: heap profile at %d keys: %v", st.Keys, err)
	}
	st.SnapshotMB = scaleSnapshotMB(leader, sc.tmp, logf)
	st.DataDirMB = dirMB(leader.dir)
	if err := sc.restarts(st, leader); err != nil {
		return err
	}
	logf("scale: %d keys: %s ms CPU per create, p50 %.2f ms, RSS %.0f MB, snapshot %.1f MB, %s ready after SIGTERM %.0f ms, after kill -9 %.0f ms",
		st.Keys, st.nodeCPU(), st.CreateP50Ms, st.RSSMB, st.SnapshotMB, st.Restarted, st.RestartTermMs, st.RestartKillMs)
	return nil
}

// startCPUMs is the CPU a just started node has used so far.
func startCPUMs(g *Gateway) float64 {
	t, err := cpuTicks(g.Pid())
	if err != nil {
		return 0
	}
	return float64(t) * 10
}

// scaleSnapshotMB is the size of `tollctl cluster snapshot save` through g.
func scaleSnapshotMB(g *Gateway, tmp string, logf func(string, ...any)) float64 {
	snap := filepath.Join(tmp, "scale.snap")
	defer os.Remove(snap)
	if _, err := g.ctl("--timeout", "5m", "cluster", "snapshot", "save", snap); err != nil {
		logf("scale: snapshot save: %v", err)
		return 0
	}
	fi, err := os.Stat(snap)
	if err != nil {
		return 0
	}
	return float64(fi.Size()) / (1 << 20)
}

// restarts stops a node (the only one, or a follower) with SIGTERM and
// starts it again, then kills it with SIGKILL and starts it again, timing
// each start to /readyz 200; the RSS at rest is read 10 s later.
func (sc *scaleSet) restarts(st *ScaleStep, leader *Gateway) error {
	g := sc.nodes[0]
	for _, n := range sc.nodes {
		if n != leader {
			g = n
			break
		}
	}
	st.Restarted = sc.names[sc.index(g)]
	if err := g.Stop(); err != nil {
		return err
	}
	d, err := g.Start()
	if err != nil {
		return fmt.Errorf("restart of %s after SIGTERM at %d keys: %w", st.Restarted, st.Keys, err)
	}
	st.RestartTermMs = float64(d) / 1e6
	st.RestartTermCPUMs = startCPUMs(g)
	g.proc.kill()
	if d, err = g.Start(); err != nil {
		return fmt.Errorf("restart of %s after kill -9 at %d keys: %w", st.Restarted, st.Keys, err)
	}
	st.RestartKillMs = float64(d) / 1e6
	st.RestartKillCPUMs = startCPUMs(g)
	time.Sleep(10 * time.Second)
	st.RSSRestMB, _ = rssMB(g.Pid())
	return nil
}

// scaleImport imports the keys numbered from..to-1 with tollctl.
func scaleImport(gw *Gateway, tmp string, from, to int) error {
	file := filepath.Join(tmp, "scale-import.jsonl")
	fh, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	for i := from; i < to; i++ {
		fmt.Fprintf(w, `{"name":"scale-%d","models":["bench*"],"rpm":600,"secret":%q}`+"\n", i, scaleSecret(i))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	defer os.Remove(file)
	_, err = gw.ctl("--timeout", "10m", "key", "import", file, "--import-id", "scale", "--batch", "5000", "-o", "json")
	return err
}

// creates creates keys one after another through leader's admin API
// and measures each create's latency and every node's CPU.
//
// idle is each node's CPU at rest (in cores): what it would have spent
// over the same time without the creates, subtracted for the net figure.
func (sc *scaleSet) creates(leader *Gateway, cfg ScaleConfig, st *ScaleStep, idle []float64) error {
	keys := pb.NewKeyServiceClient(sc.conns[sc.index(leader)])
	t0, err := sc.cpuTicks()
	if err != nil {
		return err
	}
	sw0, gc0 := sc.switchesEach(), sc.gcEach()
	began := time.Now()
	limit := cfg.Creates
	if cfg.ProfileDir != "" {
		limit = 1 << 30 // the whole profile's length
	}
	lat, err := createLoop(keys, max(1, cfg.CreateClients), limit, began.Add(cfg.CreateTime), fmt.Sprintf("scale-create-%d", st.Keys))
	if err != nil {
		return fmt.Errorf("create key at %d keys: %w", st.Keys, err)
	}
	t1, err := sc.cpuTicks()
	if err != nil {
		return err
	}
	sw1, gc1 := sc.switchesEach(), sc.gcEach()
	st.Creates = len(lat)
	st.Nodes = make([]NodeFigures, len(sc.nodes))
	took := time.Since(began).Seconds()
	for i := range sc.nodes {
		f := NodeFigures{Node: sc.names[i], CPUPerCreateMs: float64(t1[i]-t0[i]) * 10 / float64(len(lat)), // 100 ticks a second
			SwitchesPerCreate: float64(sw1[i]-sw0[i]) / float64(len(lat))}
		if gc1[i] >= gc0[i] {
			f.GCCycles = gc1[i] - gc0[i]
		}
		if i < len(idle) {
			f.IdleCores = idle[i]
			f.NetCPUPerCreateMs = max(0, f.CPUPerCreateMs-idle[i]*took*1e3/float64(len(lat)))
		}
		st.Nodes[i] = f
	}
	st.CPUPerCreateMs = st.Nodes[sc.index(leader)].CPUPerCreateMs
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	st.CreateP50Ms = float64(lat[len(lat)/2]) / 1e6
	st.CreateP99Ms = float64(lat[min(len(lat)-1, len(lat)*99/100)]) / 1e6
	return nil
}

// createLoop creates keys from clients concurrent callers, each one after
// another, until limit creates or the end; it returns their latencies.
func createLoop(keys pb.KeyServiceClient, clients, limit int, end time.Time, prefix string) ([]time.Duration, error) {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(limit) || !time.Now().Before(end) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				s := time.Now()
				_, err := keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: fmt.Sprintf("%s-%d", prefix, i)})
				d := time.Since(s)
				cancel()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				} else if err == nil {
					lat = append(lat, d)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("no create within the time")
	}
	return lat, nil
}

// dirMB is the size of the files under dir.
func dirMB(dir string) float64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return float64(n) / (1 << 20)
}

type benchToken string

func (t benchToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (benchToken) RequireTransportSecurity() bool { return false }

// write puts the scale report and its figures into dir.
func (r *ScaleResults) write(dir string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Tollgate scale run — %s\n\n", r.Date)
	nodes := "One node"
	if r.Config.Nodes > 1 {
		nodes = fmt.Sprintf("A cluster of %d nodes (n1…n%d, --bootstrap-expect; imports and creates go to the leader)", r.Config.Nodes, r.Config.Nodes)
	}
	fmt.Fprintf(&b, "`%s` on %d cores (%s), %.0f s. %s, keys imported with `tollctl key import` in batches of 5,000,\n", r.Command, r.Machine.NProc, r.Machine.CPUModel, r.Seconds, nodes)
	fmt.Fprintf(&b, "then up to %d key creates through the admin API (at most %v per step), from %d caller(s), each one create after another.\n",
		r.Config.Creates, r.Config.CreateTime, max(1, r.Config.CreateClients))
	b.WriteString("CPU per create is each node's user+system time over those creates, from /proc (10 ms ticks); net is that less\n")
	b.WriteString("what the node spent at rest over as long (measured for 5 s just before, once it was quiet after the import).\n\n")
	b.WriteString("RSS is read right after the import and the creates, and again (at rest) 10 s after the restart that follows kill -9.\n")
	if len(r.Config.NodeEnv) > 0 {
		fmt.Fprintf(&b, "The nodes ran with %s.\n", strings.Join(r.Config.NodeEnv, " "))
	}
	if r.Machine.LoadAvgStart != "" {
		fmt.Fprintf(&b, "Load average (1, 5, 15 min) at the start / end: %s / %s.\n", r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd)
	}
	b.WriteString("\n| keys | import keys/s | creates | CPU per create | create p50 / p99 | RSS | RSS at rest | snapshot | data dir | restarted | ready after SIGTERM | after kill -9 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Steps {
		writeScaleRow(&b, s)
	}
	writeSwitches(&b, r.Steps)
	writeGCCycles(&b, r.Steps)
	for _, s := range r.Steps {
		writeJoin(&b, s)
	}
	if r.Chat != nil {
		r.Chat.write(&b, r.Config.Chat)
	}
	if len(r.Steps) > 1 && r.Steps[0].CPUPerCreateMs > 0 {
		last := r.Steps[len(r.Steps)-1]
		fmt.Fprintf(&b, "\nCPU per create at %d keys is %.2f× the figure at %d keys (target ≤ 2×, and ≤ 0.5 ms).\n",
			last.Keys, last.CPUPerCreateMs/r.Steps[0].CPUPerCreateMs, r.Steps[0].Keys)
	}
	return writeReport(dir, r, b.String())
}

// writeScaleRow writes one step's row (every node's CPU and RSS in a
// cluster) and its error, if any.
func writeScaleRow(b *strings.Builder, s *ScaleStep) {
	imp := "-"
	if s.ImportPerSecond > 0 {
		imp = fmt.Sprintf("%.0f", s.ImportPerSecond)
	}
	rss := fmt.Sprintf("%.0f MB", s.RSSMB)
	if len(s.Nodes) > 1 {
		var parts []string
		for _, n := range s.Nodes {
			parts = append(parts, fmt.Sprintf("%s %.0f", n.Node, n.RSSMB))
		}
		rss = strings.Join(parts, " / ") + " MB"
	}
	fmt.Fprintf(b, "| %d | %s | %d | %s ms | %.2f / %.2f ms | %s | %.0f MB | %.1f MB | %.1f MB | %s | %.0f ms (CPU %.0f ms) | %.0f ms (CPU %.0f ms) |\n",
		s.Keys, imp, s.Creates, s.nodeCPU(), s.CreateP50Ms, s.CreateP99Ms, rss, s.RSSRestMB, s.SnapshotMB, s.DataDirMB,
		s.Restarted, s.RestartTermMs, s.RestartTermCPUMs, s.RestartKillMs, s.RestartKillCPUMs)
	if s.Err != "" {
		fmt.Fprintf(b, "\nStopped at %d keys: %s\n", s.Keys, s.Err)
	}
}

// writeReport writes a standalone scenario's figures (results.json) and
// its report (REPORT.md) into dir.
func writeReport(dir string, figures any, report string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(figures, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(report), 0o644)
}
