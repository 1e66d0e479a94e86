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
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
	// ProfileDir, when set, starts the node with --pprof-addr and keeps
	// there, per step, a CPU profile of the node over the creates
	// (cpu-KEYS.pprof, the creates then run for all of CreateTime) and a
	// heap profile after them (heap-KEYS.pprof).
	ProfileDir string `json:"profile_dir,omitempty"`
	// NodeEnv is more environment for the node, such as GOMEMLIMIT.
	NodeEnv []string `json:"node_env,omitempty"`
	Tag     string   `json:"tag,omitempty"` // the results folder is DATE-scale-TAG
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
	Err             string  `json:"error,omitempty"`
}

// ScaleResults is the report of a scale run.
type ScaleResults struct {
	Date    string       `json:"date"`
	Command string       `json:"command"`
	Machine Machine      `json:"machine"`
	Config  ScaleConfig  `json:"config"`
	Steps   []*ScaleStep `json:"steps"`
	Seconds float64      `json:"seconds"`
}

// scaleSecret is the secret of the i-th imported key: the harness keeps
// secrets, so the import needs no file of drawn secrets.
func scaleSecret(i int) string { return fmt.Sprintf("sk-scale-%012d-0123456789", i) }

// runScale runs the scale scenario on a fresh node and writes its report.
func runScale(bin *Binaries, tmp string, cfg ScaleConfig, res *ScaleResults, logf func(string, ...any)) error {
	gw, err := newGateway(bin, tmp, "")
	if err != nil {
		return err
	}
	gw.Env = cfg.NodeEnv
	gw.ReadyTimeout = 5 * time.Minute // a million keys on a busy machine
	var prof *profiler
	if cfg.ProfileDir != "" {
		if prof, err = newProfiler(cfg.ProfileDir); err != nil {
			return err
		}
		gw.Extra = append(gw.Extra, "--pprof-addr", prof.addr)
	}
	if _, err := gw.Start(); err != nil {
		return err
	}
	defer func() { _ = gw.Stop() }()
	conn, err := grpc.NewClient(gw.Admin, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(benchToken(gw.Token)))
	if err != nil {
		return err
	}
	defer conn.Close()
	keys := pb.NewKeyServiceClient(conn)
	have := 0
	for _, n := range cfg.Steps {
		st := &ScaleStep{Keys: n}
		res.Steps = append(res.Steps, st)
		if n > have {
			t0 := time.Now()
			if err := scaleImport(gw, tmp, have, n); err != nil {
				st.Err = err.Error()
				return err
			}
			st.ImportSeconds = time.Since(t0).Seconds()
			st.ImportPerSecond = float64(n-have) / st.ImportSeconds
			have = n
		}
		logf("scale: %d keys (import %.1f s)", n, st.ImportSeconds)
		cpuDone := prof.cpu(fmt.Sprintf("cpu-%d.pprof", n), cfg.CreateTime)
		if err := scaleCreates(keys, gw, cfg, st); err != nil {
			st.Err = err.Error()
			return err
		}
		if err := <-cpuDone; err != nil {
			logf("scale: CPU profile at %d keys: %v", n, err)
		}
		st.RSSMB, _ = rssMB(gw.Pid())
		if err := prof.heap(fmt.Sprintf("heap-%d.pprof", n)); err != nil {
			logf("scale: heap profile at %d keys: %v", n, err)
		}
		snap := filepath.Join(tmp, "scale.snap")
		if _, err := gw.ctl("--timeout", "5m", "cluster", "snapshot", "save", snap); err == nil {
			if fi, err := os.Stat(snap); err == nil {
				st.SnapshotMB = float64(fi.Size()) / (1 << 20)
			}
			_ = os.Remove(snap)
		} else {
			logf("scale: snapshot save at %d keys: %v", n, err)
		}
		st.DataDirMB = dirMB(gw.dir)
		if err := gw.Stop(); err != nil {
			return err
		}
		d, err := gw.Start()
		if err != nil {
			return fmt.Errorf("restart after SIGTERM at %d keys: %w", n, err)
		}
		st.RestartTermMs = float64(d) / 1e6
		gw.proc.kill()
		if d, err = gw.Start(); err != nil {
			return fmt.Errorf("restart after kill -9 at %d keys: %w", n, err)
		}
		st.RestartKillMs = float64(d) / 1e6
		time.Sleep(10 * time.Second)
		st.RSSRestMB, _ = rssMB(gw.Pid())
		logf("scale: %d keys: %.3f ms CPU per create, p50 %.2f ms, RSS %.0f MB, snapshot %.1f MB, ready after SIGTERM %.0f ms, after kill -9 %.0f ms",
			n, st.CPUPerCreateMs, st.CreateP50Ms, st.RSSMB, st.SnapshotMB, st.RestartTermMs, st.RestartKillMs)
	}
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

// scaleCreates creates keys one after another through the admin API and
// measures the node's CPU and each create's latency.
func scaleCreates(keys pb.KeyServiceClient, gw *Gateway, cfg ScaleConfig, st *ScaleStep) error {
	var lat []time.Duration
	t0, err := cpuTicks(gw.Pid())
	if err != nil {
		return err
	}
	end := time.Now().Add(cfg.CreateTime)
	limit := cfg.Creates
	if cfg.ProfileDir != "" {
		limit = 1 << 30 // the whole profile's length
	}
	for i := 0; i < limit && time.Now().Before(end); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		s := time.Now()
		_, err := keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: fmt.Sprintf("scale-create-%d-%d", st.Keys, i)})
		cancel()
		if err != nil {
			return fmt.Errorf("create key at %d keys: %w", st.Keys, err)
		}
		lat = append(lat, time.Since(s))
	}
	t1, err := cpuTicks(gw.Pid())
	if err != nil {
		return err
	}
	st.Creates = len(lat)
	st.CPUPerCreateMs = float64(t1-t0) * 10 / float64(len(lat)) // 100 ticks a second
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	st.CreateP50Ms = float64(lat[len(lat)/2]) / 1e6
	st.CreateP99Ms = float64(lat[min(len(lat)-1, len(lat)*99/100)]) / 1e6
	return nil
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
	fmt.Fprintf(&b, "`%s` on %d cores (%s), %.0f s. One node, keys imported with `tollctl key import` in batches of 5,000,\n", r.Command, r.Machine.NProc, r.Machine.CPUModel, r.Seconds)
	fmt.Fprintf(&b, "then up to %d key creates one after another through the admin API (at most %v per step).\n", r.Config.Creates, r.Config.CreateTime)
	b.WriteString("CPU per create is the node's user+system time over those creates, from /proc (10 ms ticks).\n\n")
	b.WriteString("RSS is read right after the import and the creates, and again (at rest) 10 s after the restart that follows kill -9.\n\n")
	b.WriteString("| keys | import keys/s | creates | CPU per create | create p50 / p99 | RSS | RSS at rest | snapshot | data dir | ready after SIGTERM | after kill -9 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Steps {
		imp := "-"
		if s.ImportPerSecond > 0 {
			imp = fmt.Sprintf("%.0f", s.ImportPerSecond)
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %.3f ms | %.2f / %.2f ms | %.0f MB | %.0f MB | %.1f MB | %.1f MB | %.0f ms | %.0f ms |\n",
			s.Keys, imp, s.Creates, s.CPUPerCreateMs, s.CreateP50Ms, s.CreateP99Ms, s.RSSMB, s.RSSRestMB, s.SnapshotMB, s.DataDirMB, s.RestartTermMs, s.RestartKillMs)
		if s.Err != "" {
			fmt.Fprintf(&b, "\nStopped at %d keys: %s\n", s.Keys, s.Err)
		}
	}
	if len(r.Steps) > 1 && r.Steps[0].CPUPerCreateMs > 0 {
		last := r.Steps[len(r.Steps)-1]
		fmt.Fprintf(&b, "\nCPU per create at %d keys is %.2f× the figure at %d keys (target ≤ 2×, and ≤ 0.5 ms).\n",
			last.Keys, last.CPUPerCreateMs/r.Steps[0].CPUPerCreateMs, r.Steps[0].Keys)
	}
	return writeReport(dir, r, b.String())
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
