package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
)

// options are the command line's values.
type options struct {
	quick, pin, keep, devBuild             bool
	scenarios, out, clients, rates         string
	dur, warmup, openDur, rateDur, soakDur time.Duration
	reps, small, maxWork                   int
	maxReq                                 int64
	scale, nodeEnv                         string
	scaleCfg                               ScaleConfig
	budgets                                int
	budgetDur                              time.Duration
	refs, compare, profile                 string          // see refFlags
	nodeArgs                               string          // -node-args: more flags for the node
	set                                    map[string]bool // the flags given
	tracing                                tracingOptions  // tracing.go
}

// parseOptions reads the flags, with the -quick defaults for those not
// given.
func parseOptions() (*options, error) {
	o := &options{}
	flag.BoolVar(&o.quick, "quick", false, "short phases, 1 repetition, fewer levels: the whole run in about 2 minutes")
	flag.StringVar(&o.scenarios, "scenarios", "a,b,c,d,e,f,g,h,i,j,k", "comma-separated scenarios to run (letters of issue 7)")
	flag.StringVar(&o.out, "out", "", "results folder (default: e2e/bench/results in the module)")
	flag.BoolVar(&o.pin, "pin", false, "pin gateway, mock and load generator to separate cores with taskset (needs ≥ 3 cores)")
	flag.DurationVar(&o.dur, "dur", 10*time.Second, "measurement per run (quick: 2s)")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unrecorded warm-up before each run (quick: 300ms)")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each direct/tollgate pair (quick: 1)")
	flag.DurationVar(&o.openDur, "open-dur", 30*time.Second, "length of the (d) open loop (quick: 3s)")
	flag.DurationVar(&o.rateDur, "rate-dur", 10*time.Second, "length of each (e) open loop (quick: 2s)")
	flag.DurationVar(&o.soakDur, "soak", 2*time.Minute, "length of the (k) soak (quick: 20s)")
	flag.StringVar(&o.clients, "clients", "1,10,50,100,200", "client levels of (a) and (b) (quick: 1,10,50)")
	flag.StringVar(&o.rates, "rates", "1000,2000,5000", "offered rates of (e), requests/s")
	flag.IntVar(&o.small, "small-clients", 10, "closed-loop clients of (f), (g), (h) and (i)")
	flag.Int64Var(&o.maxReq, "max-requests", 5_000_000, "bound on the requests of one phase")
	flag.IntVar(&o.maxWork, "max-workers", 4000, "bound on the workers (and connections) of an open loop")
	flag.BoolVar(&o.keep, "keep", false, "keep the temp dir with the binaries, data dir and process logs")
	flag.BoolVar(&o.devBuild, "dev-build", false, "measure a plain `go build` of tollgate (cgo) instead of the release build of deploy/Dockerfile")
	flag.StringVar(&o.nodeArgs, "node-args", "", "more flags for the Tollgate node, space-separated, e.g. \"--gc-percent 50\"")
	o.scaleFlags()
	o.refFlags()
	o.tracingFlags()
	flag.IntVar(&o.budgets, "budgets", 0, "run only the budgets scenario (issue 12) with this many budgeted keys, e.g. 10000 (the issue's figure) or 1000")
	flag.DurationVar(&o.budgetDur, "budgets-dur", 5*time.Minute, "traffic of the budgets scenario (quick: 1m)")
	flag.Parse()
	if flag.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	o.set = map[string]bool{}
	flag.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if o.quick {
		o.applyQuick()
	}
	o.scaleCfg.NodeEnv = splitList(o.nodeEnv)
	o.scaleCfg.Chat.Reps = max(1, o.scaleCfg.Chat.Reps)
	return o, nil
}

// scaleFlags defines the flags of the scale scenario.
func (o *options) scaleFlags() {
	c := &o.scaleCfg
	flag.StringVar(&o.scale, "scale", "", "run only the scale scenario (issue 12) with these key counts, e.g. 1000,100000,1000000")
	flag.IntVar(&c.Creates, "scale-creates", 500, "key creates measured per scale step")
	flag.IntVar(&c.CreateClients, "scale-create-clients", 1, "callers creating keys at once in each scale step (each one create after another)")
	flag.DurationVar(&c.CreateTime, "scale-create-time", 20*time.Second, "the longest the creates of one scale step may take")
	flag.IntVar(&c.Nodes, "scale-nodes", 1, "nodes of the scale scenario: 1, or a cluster of 3 (or more) formed with --bootstrap-expect; a cluster also times the join of one more node at the last step")
	flag.BoolVar(&c.Join, "scale-join", false, "time the join of one more node (fresh data dir) at the last step of a single-node scale run too: ready time, snapshot or log replay, its CPU and RSS")
	flag.DurationVar(&c.Chat.Dur, "scale-chat", 0, "at the last scale step, chat traffic for this long per run, alone and while keys are created (0: none)")
	flag.Float64Var(&c.Chat.CreateRate, "scale-chat-rate", 200, "key creates per second during the scale chat runs with writes")
	flag.IntVar(&c.Chat.Clients, "scale-chat-clients", 8, "closed-loop clients of the scale chat runs")
	flag.IntVar(&c.Chat.Reps, "scale-chat-reps", 3, "pairs of scale chat runs (alone, with writes); the ratios compare the medians")
	flag.StringVar(&c.Tag, "tag", "", "a suffix for the scale scenario's results folder: DATE-scale-TAG")
	flag.StringVar(&o.nodeEnv, "scale-node-env", "", "comma-separated NAME=VALUE settings for the scale nodes' environment, e.g. GOMEMLIMIT=1000MiB")
	flag.StringVar(&c.ProfileDir, "scale-profile", "", "start the (single) scale node with --pprof-addr and keep a CPU profile of each step's creates, a heap profile, and CPU profiles of the first chat runs (-scale-chat) in this folder")
}

// applyQuick sets the -quick defaults of the flags not given.
func (o *options) applyQuick() {
	def := func(name string, apply func()) {
		if !o.set[name] {
			apply()
		}
	}
	def("dur", func() { o.dur = 2 * time.Second })
	def("warmup", func() { o.warmup = 300 * time.Millisecond })
	def("reps", func() { o.reps = 1 })
	def("open-dur", func() { o.openDur = 3 * time.Second })
	def("rate-dur", func() { o.rateDur = 2 * time.Second })
	def("soak", func() { o.soakDur = 20 * time.Second })
	def("clients", func() { o.clients = "1,10,50" })
	def("budgets-dur", func() { o.budgetDur = time.Minute })
}

// config is the configuration of the issue 7 scenarios, checked.
func (o *options) config() (Config, error) {
	cfg := Config{Quick: o.quick, Reps: o.reps, Warmup: o.warmup, Dur: o.dur, OpenDur: o.openDur, RateDur: o.rateDur,
		SoakDur: o.soakDur, SmallConc: o.small, MaxRequests: o.maxReq, MaxWorkers: o.maxWork, ReadyReps: 3, NodeArgs: strings.Fields(o.nodeArgs)}
	if o.quick {
		cfg.ReadyReps = 1
	}
	var err error
	if cfg.Clients, err = parseInts(o.clients); err != nil {
		return cfg, fmt.Errorf("-clients: %w", err)
	}
	if cfg.Rates, err = parseInts(o.rates); err != nil {
		return cfg, fmt.Errorf("-rates: %w", err)
	}
	if cfg.Scenarios, err = parseScenarios(o.scenarios); err != nil {
		return cfg, err
	}
	if err := o.refConfig(&cfg); err != nil {
		return cfg, err
	}
	switch {
	case cfg.Reps < 1 || cfg.Dur <= 0 || cfg.OpenDur <= 0 || cfg.RateDur <= 0 || cfg.SoakDur <= 0 || cfg.Warmup < 0:
		return cfg, fmt.Errorf("-reps must be ≥ 1 and the durations positive")
	case cfg.Dur > 10*time.Minute || cfg.OpenDur > 10*time.Minute || cfg.RateDur > 10*time.Minute || cfg.SoakDur > time.Hour:
		return cfg, fmt.Errorf("phases are bounded: -dur, -open-dur, -rate-dur ≤ 10m, -soak ≤ 1h")
	case cfg.SmallConc < 1 || cfg.MaxRequests < 1 || cfg.MaxWorkers < 1:
		return cfg, fmt.Errorf("-small-clients, -max-requests and -max-workers must be ≥ 1")
	}
	return cfg, nil
}

// parseScenarios reads -scenarios: letters a to k, each once.
func parseScenarios(s string) ([]string, error) {
	var out []string
	for _, id := range strings.Split(s, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if len(id) != 1 || !strings.Contains("abcdefghijk", id) {
			return nil, fmt.Errorf("-scenarios: unknown scenario %q (known: a to k)", id)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-scenarios: none given")
	}
	return out, nil
}
