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
	"flag"
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
	var (
		quick     = flag.Bool("quick", false, "short phases, 1 repetition, fewer levels: the whole run in about 2 minutes")
		scenarios = flag.String("scenarios", "a,b,c,d,e,f,g,h,i,j,k", "comma-separated scenarios to run (letters of issue 7)")
		out       = flag.String("out", "", "results folder (default: e2e/bench/results in the module)")
		pin       = flag.Bool("pin", false, "pin gateway, mock and load generator to separate cores with taskset (needs ≥ 3 cores)")
		dur       = flag.Duration("dur", 10*time.Second, "measurement per run (quick: 2s)")
		warmup    = flag.Duration("warmup", time.Second, "unrecorded warm-up before each run (quick: 300ms)")
		reps      = flag.Int("reps", 3, "repetitions of each direct/tollgate pair (quick: 1)")
		openDur   = flag.Duration("open-dur", 30*time.Second, "length of the (d) open loop (quick: 3s)")
		rateDur   = flag.Duration("rate-dur", 10*time.Second, "length of each (e) open loop (quick: 2s)")
		soakDur   = flag.Duration("soak", 2*time.Minute, "length of the (k) soak (quick: 20s)")
		clients   = flag.String("clients", "1,10,50,100,200", "client levels of (a) and (b) (quick: 1,10,50)")
		rates     = flag.String("rates", "1000,2000,5000", "offered rates of (e), requests/s")
		small     = flag.Int("small-clients", 10, "closed-loop clients of (f), (g), (h) and (i)")
		maxReq    = flag.Int64("max-requests", 5_000_000, "bound on the requests of one phase")
		maxWork   = flag.Int("max-workers", 4000, "bound on the workers (and connections) of an open loop")
		keep      = flag.Bool("keep", false, "keep the temp dir with the binaries, data dir and process logs")
		devBuild  = flag.Bool("dev-build", false, "measure a plain `go build` of tollgate (cgo) instead of the release build of deploy/Dockerfile")
		scale     = flag.String("scale", "", "run only the scale scenario (issue 12) with these key counts, e.g. 1000,100000,1000000 (quick: 1000,10000,50000 when empty and -quick)")
		creates   = flag.Int("scale-creates", 500, "key creates measured per scale step")
		createDur = flag.Duration("scale-create-time", 20*time.Second, "the longest the creates of one scale step may take")
		tag       = flag.String("tag", "", "a suffix for a standalone scenario's results folder: DATE-scale-TAG")
		nodeEnv   = flag.String("scale-node-env", "", "comma-separated NAME=VALUE settings for the scale node's environment, e.g. GOMEMLIMIT=1000MiB")
		profDir   = flag.String("scale-profile", "", "start the scale node with --pprof-addr and keep a CPU profile of each step's creates and a heap profile in this folder")
		budgets   = flag.Int("budgets", 0, "run only the budgets scenario (issue 12) with this many budgeted keys, e.g. 10000 (the issue's figure) or 1000")
		budgetDur = flag.Duration("budgets-dur", 5*time.Minute, "traffic of the budgets scenario (quick: 1m)")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		def := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		def("dur", func() { *dur = 2 * time.Second })
		def("warmup", func() { *warmup = 300 * time.Millisecond })
		def("reps", func() { *reps = 1 })
		def("open-dur", func() { *openDur = 3 * time.Second })
		def("rate-dur", func() { *rateDur = 2 * time.Second })
		def("soak", func() { *soakDur = 20 * time.Second })
		def("clients", func() { *clients = "1,10,50" })
	}
	if *budgets > 0 {
		n, d := *budgets, *budgetDur
		if *quick && !set["budgets-dur"] {
			d = time.Minute
		}
		return mainBudgets(start, BudgetsConfig{Keys: n, Dur: d, Clients: 16, Sample: 10 * time.Second, MaxRequests: *maxReq}, *out, *devBuild)
	}
	if *scale != "" {
		steps, err := parseInts(*scale)
		if err != nil {
			return fmt.Errorf("-scale: %w", err)
		}
		return mainScale(start, ScaleConfig{Steps: steps, Creates: *creates, CreateTime: *createDur, ProfileDir: *profDir, NodeEnv: splitList(*nodeEnv), Tag: *tag}, *out, *devBuild)
	}
	cfg := Config{Quick: *quick, Reps: *reps, Warmup: *warmup, Dur: *dur, OpenDur: *openDur, RateDur: *rateDur,
		SoakDur: *soakDur, SmallConc: *small, MaxRequests: *maxReq, MaxWorkers: *maxWork, ReadyReps: 3}
	if *quick {
		cfg.ReadyReps = 1
	}
	var err error
	if cfg.Clients, err = parseInts(*clients); err != nil {
		return fmt.Errorf("-clients: %w", err)
	}
	if cfg.Rates, err = parseInts(*rates); err != nil {
		return fmt.Errorf("-rates: %w", err)
	}
	known := "abcdefghijk"
	for _, s := range strings.Split(*scenarios, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if len(s) != 1 || !strings.Contains(known, s) {
			return fmt.Errorf("-scenarios: unknown scenario %q (known: a to k)", s)
		}
		if !slices.Contains(cfg.Scenarios, s) {
			cfg.Scenarios = append(cfg.Scenarios, s)
		}
	}
	switch {
	case len(cfg.Scenarios) == 0:
		return fmt.Errorf("-scenarios: none given")
	case cfg.Reps < 1 || cfg.Dur <= 0 || cfg.OpenDur <= 0 || cfg.RateDur <= 0 || cfg.SoakDur <= 0 || cfg.Warmup < 0:
		return fmt.Errorf("-reps must be ≥ 1 and the durations positive")
	case cfg.Dur > 10*time.Minute || cfg.OpenDur > 10*time.Minute || cfg.RateDur > 10*time.Minute || cfg.SoakDur > time.Hour:
		return fmt.Errorf("phases are bounded: -dur, -open-dur, -rate-dur ≤ 10m, -soak ≤ 1h")
	case cfg.SmallConc < 1 || cfg.MaxRequests < 1 || cfg.MaxWorkers < 1:
		return fmt.Errorf("-small-clients, -max-requests and -max-workers must be ≥ 1")
	}
	want := func(id string) bool { return slices.Contains(cfg.Scenarios, id) }

	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, "e2e", "bench", "results")
	}
	date := start.Format("2006-01-02")
	if *quick {
		date += "-quick"
	}
	resDir := filepath.Join(*out, date)

	// ^C once: finish the current run and write a partial report; twice: abort.
	var stopping atomic.Bool
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
	logf := func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}

	tmp, err := os.MkdirTemp("", "tollgate-bench-")
	if err != nil {
		return err
	}
	keepTmp := *keep
	defer func() {
		if keepTmp {
			fmt.Println("bench: kept", tmp)
		} else {
			os.RemoveAll(tmp)
		}
	}()
	failed := func(err error) error { keepTmp = true; return err }

	res := &Results{Date: date, Started: start, Config: cfg, Command: "go run ./e2e/bench " + strings.Join(os.Args[1:], " ")}
	res.Machine = machineInfo(root)
	tasksetPath, _ := exec.LookPath("taskset")
	res.Pinning = planPinning(*pin, runtime.NumCPU(), tasksetPath)
	logf("bench: %d cores (%s); %s", res.Machine.NProc, res.Machine.CPUModel, res.Pinning.Note)

	logf("building tollgate, tollctl and mockllm into %s", tmp)
	bin, err := build(root, filepath.Join(tmp, "bin"), *devBuild)
	if err != nil {
		return failed(err)
	}
	res.Machine.Build = bin.Build
	if res.Pinning.Applied {
		if err := pinSelf(res.Pinning.LoadGen); err != nil {
			return failed(err)
		}
	}

	mockAddr, err := freeAddr()
	if err != nil {
		return err
	}
	mock, err := startChild("mockllm", filepath.Join(tmp, "mockllm.log"), res.Pinning.Mock, nil, bin.Mockllm, "--addr", mockAddr, "--quiet")
	if err != nil {
		return failed(err)
	}
	defer killChildren()
	if _, err := waitStatus(mock, "http://"+mockAddr+"/v1/models", 200, 10*time.Millisecond, 30*time.Second); err != nil {
		return failed(err)
	}
	deadAddr, err := freeAddr() // a port nothing listens on: the failing primary of (i)
	if err != nil {
		return err
	}
	gw, err := newGateway(bin, tmp, res.Pinning.Gateway)
	if err != nil {
		return err
	}
	firstReady, err := gw.Start()
	if err != nil {
		return failed(err)
	}
	logf("tollgate ready in %.0f ms on a fresh data dir (http %s, admin %s); mockllm on %s", float64(firstReady)/1e6, gw.HTTP, gw.Admin, mockAddr)
	secret, err := gw.configure("http://"+mockAddr+"/v1", "http://"+deadAddr+"/v1")
	if err != nil {
		return failed(err)
	}
	b := &bench{cfg: cfg, bin: bin, gw: gw, mock: mock, mockBase: "http://" + mockAddr + "/v1", secret: secret,
		header: http.Header{"Authorization": {"Bearer " + secret}, "Content-Type": {"application/json"}},
		mon:    &Monitor{Gateway: gw.Pid, Mock: mock.pid(), Interval: time.Second},
		logf:   logf, interrupted: stopping.Load}
	if err := b.smokeAll(); err != nil {
		return failed(fmt.Errorf("smoke test: %w\n--- tollgate log:\n%s", err, gw.proc.logTail()))
	}
	logf("routes and key configured; every route answered a validated request")

	if want("j") {
		logf("(j) footprint")
		res.Footprint = &Footprint{}
		if err := b.footprint(res.Footprint, firstReady); err != nil {
			return failed(err)
		}
	}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		if !want(id) || stopping.Load() {
			continue
		}
		logf("(%s) %s", id, b.newScenario(id).Title)
		res.Scenarios = append(res.Scenarios, b.runScenario(id))
	}
	if res.Footprint != nil && len(res.Scenarios) > 0 && !stopping.Load() {
		time.Sleep(2 * time.Second)
		res.Footprint.RSSAfterLoadMB, _ = rssMB(gw.Pid())
	}
	if want("k") && !stopping.Load() {
		// A fresh process, so growth is not hidden by memory the earlier
		// scenarios left for the scavenger to return.
		if len(res.Scenarios) > 0 {
			if err := gw.Stop(); err != nil {
				return failed(err)
			}
			if _, err := gw.Start(); err != nil {
				return failed(err)
			}
		}
		logf("(k) soak for %v on a freshly restarted node", cfg.SoakDur)
		res.Soak = b.soak()
	}
	if err := gw.Stop(); err != nil {
		res.Notes = append(res.Notes, "Stopping Tollgate at the end: "+err.Error())
	}
	_ = mock.terminate(10 * time.Second)
	if stopping.Load() {
		res.Notes = append(res.Notes, "The run was interrupted: this report is partial.")
	}
	if ld, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.Machine.LoadAvgEnd = strings.Join(strings.Fields(string(ld))[:3], " ")
	}
	res.Seconds = time.Since(start).Seconds()
	res.evaluate()
	if err := res.write(resDir); err != nil {
		return err
	}
	printSummary(res, resDir)
	return nil
}

// printSummary shows the targets and where the report is.
func printSummary(r *Results, dir string) {
	fmt.Println()
	fmt.Println("Targets of issue 7:")
	for _, c := range r.Targets {
		fmt.Printf("  %-8s (%s) %s: %s\n", c.Status, c.Scenario, c.Target, c.Measured)
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
	logf := func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
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
