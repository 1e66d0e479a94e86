// Command bench is Tollgate's benchmark harness (issue 7). It builds
// tollgate, tollctl and mockllm, starts mockllm and one Tollgate node on
// loopback, and measures every scenario direct to the mock and through the
// gateway in the same run, alternating. It writes a markdown report, SVG
// charts and results.json under e2e/bench/results/DATE[-quick]/.
//
//	go run ./e2e/bench [-quick] [-scenarios a,b,...] [-out DIR] [-pin]
//
// See README.md next to this file.
package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		killChildren()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run() error {
	start := time.Now()
	o, err := parseOptions()
	if err != nil {
		return err
	}
	if *mcpRounds > 0 {
		return mainMCP(start, o.out, o.devBuild)
	}
	if o.tracing.on || o.tracing.sink != "" {
		return mainTracing(start, o)
	}
	if o.budgets > 0 {
		return mainBudgets(start, BudgetsConfig{Keys: o.budgets, Dur: o.budgetDur, Clients: 16, Sample: 10 * time.Second, MaxRequests: o.maxReq}, o.out, o.devBuild)
	}
	if o.scale != "" {
		if o.scaleCfg.Steps, err = parseInts(o.scale); err != nil {
			return fmt.Errorf("-scale: %w", err)
		}
		return mainScale(start, o.scaleCfg, o.out, o.devBuild)
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "e2e", "bench", "results")
	}
	date := start.Format("2006-01-02")
	if o.quick {
		date += "-quick"
	}
	res := &Results{Date: date, Started: start, Config: cfg, Command: "go run ./e2e/bench " + strings.Join(os.Args[1:], " ")}
	res.Machine = machineInfo(root)
	tasksetPath, _ := exec.LookPath("taskset")
	res.Pinning = planPinning(o.pin, runtime.NumCPU(), tasksetPath)
	return runSuite(root, o, res, filepath.Join(o.out, date))
}

// onInterrupt makes ^C once finish the current run and write a partial
// report (stopping turns true), and ^C twice abort.
func onInterrupt() (stopping *atomic.Bool) {
	stopping = new(atomic.Bool)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		stopping.Store(true)
		fmt.Fprintln(os.Stderr, "bench: interrupted: finishing the current run, then writing a partial report (again to abort)")
		<-sigs
		killChildren()
		os.Exit(130)
	}()
	return stopping
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// runSuite runs the issue 7 scenarios in a temp dir (kept after a
// failure or with -keep) and writes the report into resDir.
func runSuite(root string, o *options, res *Results, resDir string) error {
	stopping := onInterrupt()
	tmp, err := os.MkdirTemp("", "tollgate-bench-")
	if err != nil {
		return err
	}
	keepTmp := o.keep
	defer func() {
		if keepTmp {
			fmt.Println("bench: kept", tmp)
		} else {
			os.RemoveAll(tmp)
		}
	}()
	defer killChildren()
	logf("bench: %d cores (%s); %s", res.Machine.NProc, res.Machine.CPUModel, res.Pinning.Note)
	b, firstReady, err := setupSuite(root, tmp, o.devBuild, res, stopping)
	if err != nil {
		keepTmp = true
		return err
	}
	if err := b.runScenarios(res, firstReady, stopping); err != nil {
		keepTmp = true
		return err
	}
	if err := b.gw.Stop(); err != nil {
		res.Notes = append(res.Notes, "Stopping Tollgate at the end: "+err.Error())
	}
	_ = b.mock.terminate(10 * time.Second)
	if stopping.Load() {
		res.Notes = append(res.Notes, "The run was interrupted: this report is partial.")
	}
	if ld, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.Machine.LoadAvgEnd = strings.Join(strings.Fields(string(ld))[:3], " ")
	}
	res.Seconds = time.Since(res.Started).Seconds()
	res.evaluate()
	if err := res.write(resDir); err != nil {
		return err
	}
	printSummary(res, resDir)
	return nil
}

// setupSuite builds the binaries, starts mockllm and a fresh node,
// configures the routes and a key, and smoke-tests every route; it
// returns the bench and the node's first time to ready.
func setupSuite(root, tmp string, dev bool, res *Results, stopping *atomic.Bool) (*bench, time.Duration, error) {
	logf("building tollgate, tollctl and mockllm into %s", tmp)
	bin, err := build(root, filepath.Join(tmp, "bin"), dev)
	if err != nil {
		return nil, 0, err
	}
	res.Machine.Build = bin.Build
	if res.Pinning.Applied {
		if err := pinSelf(res.Pinning.LoadGen); err != nil {
			return nil, 0, err
		}
	}
	mockAddr, err := freeAddr()
	if err != nil {
		return nil, 0, err
	}
	mock, err := startChild("mockllm", filepath.Join(tmp, "mockllm.log"), res.Pinning.Mock, nil, bin.Mockllm, "--addr", mockAddr, "--quiet")
	if err != nil {
		return nil, 0, err
	}
	if _, err := waitStatus(mock, "http://"+mockAddr+"/v1/models", 200, 10*time.Millisecond, 30*time.Second); err != nil {
		return nil, 0, err
	}
	deadAddr, err := freeAddr() // a port nothing listens on: the failing primary of (i)
	if err != nil {
		return nil, 0, err
	}
	gw, err := newGateway(bin, tmp, res.Pinning.Gateway)
	if err != nil {
		return nil, 0, err
	}
	gw.Extra = append(gw.Extra, res.Config.NodeArgs...)
	refs, prof, err := setupRefs(res, bin, tmp, mockAddr, gw)
	if err != nil {
		return nil, 0, err
	}
	firstReady, err := gw.Start()
	if err != nil {
		return nil, 0, err
	}
	logf("tollgate ready in %.0f ms on a fresh data dir (http %s, admin %s); mockllm on %s", float64(firstReady)/1e6, gw.HTTP, gw.Admin, mockAddr)
	secret, err := gw.configure("http://"+mockAddr+"/v1", "http://"+deadAddr+"/v1")
	if err != nil {
		return nil, 0, err
	}
	b := &bench{cfg: res.Config, bin: bin, gw: gw, mock: mock, mockBase: "http://" + mockAddr + "/v1", secret: secret,
		header: http.Header{"Authorization": {"Bearer " + secret}, "Content-Type": {"application/json"}},
		mon:    &Monitor{Gateway: gw.Pid, Mock: mock.pid(), Interval: time.Second},
		logf:   logf, interrupted: stopping.Load, refs: refs, prof: prof, compareHeader: compareHeader()}
	if err := b.smokeAll(); err != nil {
		return nil, 0, fmt.Errorf("smoke test: %w\n--- tollgate log:\n%s", err, gw.proc.logTail())
	}
	logf("routes and key configured; every route answered a validated request")
	return b, firstReady, nil
}

// runScenarios runs (j), then (a) to (i), then (k) on a freshly
// restarted node, as far as they are wanted and the run is not stopping.
func (b *bench) runScenarios(res *Results, firstReady time.Duration, stopping *atomic.Bool) error {
	want := func(id string) bool { return slices.Contains(b.cfg.Scenarios, id) && !stopping.Load() }
	if want("j") {
		logf("(j) footprint")
		res.Footprint = &Footprint{}
		if err := b.footprint(res.Footprint, firstReady); err != nil {
			return err
		}
	}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		if want(id) {
			logf("(%s) %s", id, b.newScenario(id).Title)
			res.Scenarios = append(res.Scenarios, b.runScenario(id))
		}
	}
	if res.Footprint != nil && len(res.Scenarios) > 0 && !stopping.Load() {
		time.Sleep(2 * time.Second)
		res.Footprint.RSSAfterLoadMB, _ = rssMB(b.gw.Pid())
		b.restAfterLoad(res.Footprint, stopping)
	}
	if !want("k") {
		return nil
	}
	// A fresh process, so growth is not hidden by memory the earlier
	// scenarios left for the scavenger to return.
	if len(res.Scenarios) > 0 {
		if err := b.gw.Stop(); err != nil {
			return err
		}
		if _, err := b.gw.Start(); err != nil {
			return err
		}
	}
	logf("(k) soak for %v on a freshly restarted node", b.cfg.SoakDur)
	res.Soak = b.soak()
	return nil
}

// printSummary shows the targets and where the report is.
func printSummary(r *Results, dir string) {
	fmt.Println()
	fmt.Println("Targets of issue 7:")
	for _, c := range r.Targets {
		fmt.Printf("  %-8s (%s) %s: %s\n", c.Status, c.Scenario, c.Target, c.Measured)
	}
	if len(r.Ratios) > 0 {
		fmt.Println("\nAgainst the references (issue 17):")
	}
	for _, x := range r.Ratios {
		if x.Status == "not run" {
			fmt.Printf("  %-8s vs %-8s %s\n", x.Status, x.Ref, x.Figure)
			continue
		}
		fmt.Printf("  %-8s vs %-8s %s: %s (%s vs %s; target %s)\n", x.Status, x.Ref, x.Figure, x.Shown, x.Tollgate, x.Reference, x.Target)
	}
	fmt.Printf("\nReport: %s\n", filepath.Join(dir, "REPORT.md"))
}

// moduleRoot is the directory of the go.mod of the current module.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run from inside the tollgate module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

// machineInfo gathers what the report says about the machine.
func machineInfo(root string) Machine {
	m := Machine{NProc: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPUModel: "unknown"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					kb, _ := strconv.Atoi(f[0])
					m.MemTotalMB = kb / 1024
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.GoVersion = strings.TrimSpace(string(out))
	} else {
		m.GoVersion = runtime.Version()
	}
	cmd := exec.Command("git", "rev-parse", "--short", "HEAD")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		st := exec.Command("git", "status", "--porcelain", "--untracked-files=no")
		st.Dir = root
		if o, err := st.Output(); err == nil && len(strings.TrimSpace(string(o))) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	} else {
		m.Commit = "unknown"
	}
	if ld, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvgStart = strings.Join(strings.Fields(string(ld))[:3], " ")
	}
	return m
}

// standalone runs one of the scenarios that need a node of their own
// (scale, budgets): it builds the binaries into a temp dir and hands run
// the module root, the results folder, the temp dir, the binaries and a
// logger. The temp dir and every child process are gone when it returns.
func standalone(name, out string, dev bool, run func(out, tmp string, bin *Binaries, root string, logf func(string, ...any)) error) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(root, "e2e", "bench", "results")
	}
	tmp, err := os.MkdirTemp("", "tollgate-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	defer killChildren()
	logf("building tollgate, tollctl and mockllm into %s", tmp)
	bin, err := build(root, filepath.Join(tmp, "bin"), dev)
	if err != nil {
		return err
	}
	return run(out, tmp, bin, root, logf)
}

// mainScale runs the scale scenario alone.
func mainScale(start time.Time, cfg ScaleConfig, out string, dev bool) error {
	if !slices.IsSorted(cfg.Steps) || cfg.Steps[0] < 1 || cfg.Steps[len(cfg.Steps)-1] > 2_000_000 || cfg.Creates < 1 {
		return fmt.Errorf("-scale: key counts must rise, from 1 to at most 2,000,000; -scale-creates ≥ 1")
	}
	return standalone("scale", out, dev, func(out, tmp string, bin *Binaries, root string, logf func(string, ...any)) error {
		res := &ScaleResults{Date: start.Format("2006-01-02"), Command: "go run ./e2e/bench " + strings.Join(os.Args[1:], " "),
			Machine: machineInfo(root), Config: cfg}
		res.Machine.Build = bin.Build
		runErr := runScale(bin, tmp, cfg, res, logf)
		res.Seconds = time.Since(start).Seconds()
		dir := filepath.Join(out, res.Date+"-scale")
		if cfg.Tag != "" {
			dir += "-" + cfg.Tag
		}
		if err := res.write(dir); err != nil {
			return err
		}
		fmt.Printf("\nReport: %s\n", filepath.Join(dir, "REPORT.md"))
		return runErr
	})
}

// mainBudgets runs the budgets scenario alone.
func mainBudgets(start time.Time, cfg BudgetsConfig, out string, dev bool) error {
	if cfg.Keys > 1_000_000 || cfg.Dur <= 0 || cfg.Dur > time.Hour {
		return fmt.Errorf("-budgets: at most 1,000,000 keys; -budgets-dur between 0 and 1h")
	}
	return standalone("budgets", out, dev, func(out, tmp string, bin *Binaries, root string, logf func(string, ...any)) error {
		res := &BudgetsResults{Date: start.Format("2006-01-02"), Command: "go run ./e2e/bench " + strings.Join(os.Args[1:], " "),
			Machine: machineInfo(root), Config: cfg}
		res.Machine.Build = bin.Build
		runErr := runBudgets(bin, tmp, cfg, res, logf)
		if runErr != nil {
			res.Err = runErr.Error()
		}
		dir := filepath.Join(out, fmt.Sprintf("%s-budgets-%d", res.Date, cfg.Keys))
		if err := res.write(dir); err != nil {
			return err
		}
		fmt.Printf("\nReport: %s\n", filepath.Join(dir, "REPORT.md"))
		return runErr
	})
}
