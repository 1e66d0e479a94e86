package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Ref is a reference proxy measured beside Tollgate at every point of the
// comparative scenarios, on the same mock and in the same alternation:
// HAProxy (a plain L7 hop that parses no JSON: the limit), a 20-line Go
// httputil.ReverseProxy, a bare fasthttp proxy (the floor for a Go proxy),
// or any OpenAI-compatible gateway given with -compare. A reference gets the same request as the direct side (the
// upstream model string, with the mock's directives), so it must pass the
// model through to the mock.
type Ref struct {
	Name string `json:"name"`
	Base string `json:"base_url"` // http://host:port/v1
	What string `json:"what"`
	proc *child // nil when the harness did not start it (-compare)
}

// Pid is the reference's process (0 when the harness did not start it:
// its CPU and RSS are then not measured).
func (r *Ref) Pid() int {
	if r == nil || r.proc == nil {
		return 0
	}
	return r.proc.pid()
}

// Names of the built-in references; -compare may not reuse them.
const (
	RefHAProxy   = "haproxy"
	RefGoProxy   = "goproxy"
	RefFastProxy = "fastproxy"
)

var reservedNames = []string{"direct", "tollgate", RefHAProxy, RefGoProxy, RefFastProxy}

// goRefs are the built-in references written in Go (built into the
// harness's temp dir from these packages), with what the report says of
// each.
var goRefs = map[string]struct{ pkg, what string }{
	RefGoProxy:   {"./e2e/bench/goproxy", "Go `httputil.ReverseProxy`, 20 lines (e2e/bench/goproxy)"},
	RefFastProxy: {"./e2e/bench/fastproxy", "bare fasthttp proxy: fasthttp server and HostClient, streamed answers (e2e/bench/fastproxy)"},
}

// goRefPackages are the packages of the Go references, in a fixed order.
func goRefPackages() []string {
	var out []string
	for _, r := range goRefs {
		out = append(out, r.pkg)
	}
	slices.Sort(out)
	return out
}

// parseRefs reads -refs: which built-in references to run ("none" or empty
// for none).
func parseRefs(s string) ([]string, error) {
	var out []string
	for _, n := range splitList(s) {
		switch n {
		case "none":
			continue
		case RefHAProxy, RefGoProxy, RefFastProxy:
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		default:
			return nil, fmt.Errorf("-refs: unknown reference %q (known: haproxy, goproxy, fastproxy, none)", n)
		}
	}
	return out, nil
}

// parseCompare reads -compare: name=baseURL pairs, comma-separated; the
// base URL is the API root that /chat/completions is appended to (e.g.
// http://127.0.0.1:8080/v1).
func parseCompare(s string) ([]*Ref, error) {
	var out []*Ref
	for _, item := range splitList(s) {
		name, base, ok := strings.Cut(item, "=")
		name, base = strings.TrimSpace(name), strings.TrimRight(strings.TrimSpace(base), "/")
		if !ok || name == "" || base == "" {
			return nil, fmt.Errorf("-compare: %q is not name=baseURL", item)
		}
		if strings.ContainsAny(name, " |`") || slices.Contains(reservedNames, name) {
			return nil, fmt.Errorf("-compare: %q cannot name a gateway (reserved or not a plain word)", name)
		}
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("-compare: %s: %q is not an http(s) base URL", name, base)
		}
		if slices.ContainsFunc(out, func(r *Ref) bool { return r.Name == name }) {
			return nil, fmt.Errorf("-compare: %q given twice", name)
		}
		out = append(out, &Ref{Name: name, Base: base, What: "given with -compare (not started by the harness: no CPU or RSS)"})
	}
	return out, nil
}

// haproxyConfig is a plain L7 hop to the mock: keep-alive both ways,
// connections to the mock reused, and no Nagle delay (without
// http-no-delay stream chunks are bunched: gap p99 ~44 ms instead of ~6).
func haproxyConfig(listen, mock string) string {
	return `global
    maxconn 8000
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    option http-no-delay
    http-reuse always
frontend bench
    bind ` + listen + `
    default_backend mock
backend mock
    server mock ` + mock + ` maxconn 8000
`
}

// startRefs starts the built-in references wanted, in front of the mock,
// and waits until each answers /v1/models.
func startRefs(names []string, bin *Binaries, tmp, mockAddr, cpus string) ([]*Ref, error) {
	var out []*Ref
	for _, n := range names {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		ref := &Ref{Name: n, Base: "http://" + addr + "/v1"}
		switch n {
		case RefHAProxy:
			path, err := haproxyPath()
			if err != nil {
				return nil, err
			}
			cfg := filepath.Join(tmp, "haproxy.cfg")
			if err := os.WriteFile(cfg, []byte(haproxyConfig(addr, mockAddr)), 0o644); err != nil {
				return nil, err
			}
			ref.What = "HAProxy (`haproxy -db`, plain L7 hop, keep-alive, http-no-delay)"
			ref.proc, err = startChild(n, filepath.Join(tmp, n+".log"), cpus, nil, path, "-db", "-f", cfg)
			if err != nil {
				return nil, err
			}
		default:
			ref.What = goRefs[n].what
			ref.proc, err = startChild(n, filepath.Join(tmp, n+".log"), cpus, nil, filepath.Join(bin.Dir, n), "-addr", addr, "-upstream", "http://"+mockAddr)
			if err != nil {
				return nil, err
			}
		}
		if _, err := waitStatus(ref.proc, ref.Base+"/models", 200, 10*time.Millisecond, 30*time.Second); err != nil {
			return nil, err
		}
		out = append(out, ref)
	}
	return out, nil
}

// haproxyPath finds the haproxy binary (Debian puts it in /usr/sbin,
// which a user's PATH may lack).
func haproxyPath() (string, error) {
	if path, err := exec.LookPath("haproxy"); err == nil {
		return path, nil
	}
	for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("haproxy is not installed (Debian: apt-get install haproxy); run with -refs goproxy or -refs none")
}

// refTarget is the direct target d sent through ref instead.
func (b *bench) refTarget(ref *Ref, d *Target) *Target {
	t := *d
	t.Name = ref.Name
	t.URL = ref.Base + strings.TrimPrefix(d.URL, b.mockBase)
	if len(b.compareHeader) > 0 && ref.proc == nil {
		t.Header = b.compareHeader
	}
	return &t
}

// refMonitor samples the reference's process instead of Tollgate's.
func (b *bench) refMonitor(ref *Ref) *Monitor {
	if b.mon == nil {
		return nil
	}
	return &Monitor{Gateway: ref.Pid, Mock: b.mon.Mock, Interval: b.mon.Interval}
}

// runsRefs says whether scenario id measures the references too: every
// comparative scenario but failover, whose direct side is no single hop.
func runsRefs(id string) bool { return id != "i" }

// entry is one target of a point and the monitor that measures it.
type entry struct {
	t   *Target
	mon *Monitor
}

// lineup is the targets of a point: direct, Tollgate, then the references.
type lineup []entry

// lineup builds the targets of a point of scenario scn.
func (b *bench) lineup(scn string, d, g *Target) lineup {
	l := lineup{{d, b.mon}, {g, b.mon}}
	if runsRefs(scn) {
		for _, ref := range b.refs {
			l = append(l, entry{b.refTarget(ref, d), b.refMonitor(ref)})
		}
	}
	return l
}

// order is the running order of repetition rep: forward on even
// repetitions and backward on odd ones (ABBA for two targets), so that no
// target always runs first or right after the same neighbour.
func (l lineup) order(rep int) lineup {
	out := slices.Clone(l)
	if rep%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// record files r, a run of t, among the point's runs.
func (p *Point) record(t, d, g *Target, r *RunResult) {
	switch t {
	case d:
		p.DirectRuns = append(p.DirectRuns, r)
	case g:
		p.GatewayRuns = append(p.GatewayRuns, r)
	default:
		if p.RefRuns == nil {
			p.RefRuns, p.Refs = map[string][]*RunResult{}, map[string]*RunResult{}
		}
		p.RefRuns[t.Name] = append(p.RefRuns[t.Name], r)
	}
}

// StreamRatioClients is the client level of (b) whose streams/s issue 17
// compares with HAProxy's; (b) always measures it.
const StreamRatioClients = 16

// withLevel is levels with n added in order, if it is not there yet.
func withLevel(levels []int, n int) []int {
	if slices.Contains(levels, n) {
		return levels
	}
	out := append(slices.Clone(levels), n)
	slices.Sort(out)
	return out
}

// refFlags defines the flags of the reference proxies and the profiles.
func (o *options) refFlags() {
	flag.StringVar(&o.refs, "refs", "haproxy,goproxy", "reference proxies measured beside Tollgate at every point: haproxy, goproxy (a 20-line httputil.ReverseProxy), fastproxy (a bare fasthttp proxy), or none")
	flag.StringVar(&o.compare, "compare", os.Getenv("TOLLGATE_BENCH_COMPARE"), "more OpenAI-compatible gateways already running, as name=baseURL,... (e.g. litellm=http://127.0.0.1:8080/v1); they get the mock's model strings and, if TOLLGATE_BENCH_COMPARE_KEY is set, that bearer key (env TOLLGATE_BENCH_COMPARE)")
	flag.StringVar(&o.profile, "profile", "", "start the node with --pprof-addr and keep CPU and allocation profiles of (c) and of (b) at 16 clients in this folder")
}

// refConfig checks -refs, -compare and -profile into cfg.
func (o *options) refConfig(cfg *Config) error {
	var err error
	if cfg.Refs, err = parseRefs(o.refs); err != nil {
		return err
	}
	if cfg.Compare, err = parseCompare(o.compare); err != nil {
		return err
	}
	cfg.ProfileDir = o.profile
	return nil
}

// setupRefs starts the built-in references, adds the -compare gateways,
// records what each is, and readies the profiler of -profile (the node
// then starts with --pprof-addr).
func setupRefs(res *Results, bin *Binaries, tmp, mockAddr string, gw *Gateway) ([]*Ref, *profiler, error) {
	refs, err := startRefs(res.Config.Refs, bin, tmp, mockAddr, res.Pinning.Gateway)
	if err != nil {
		return nil, nil, err
	}
	refs = append(refs, res.Config.Compare...)
	res.Refs = refs
	for _, r := range refs {
		logf("reference %s at %s: %s", r.Name, r.Base, r.What)
	}
	if res.Config.ProfileDir == "" {
		return refs, nil, nil
	}
	prof, err := newProfiler(res.Config.ProfileDir)
	if err != nil {
		return nil, nil, err
	}
	gw.Extra = append(gw.Extra, "--pprof-addr", prof.addr)
	return refs, prof, nil
}

// compareHeader is the key header for the -compare gateways, from
// TOLLGATE_BENCH_COMPARE_KEY (nil: they get Tollgate's).
func compareHeader() http.Header {
	k := os.Getenv("TOLLGATE_BENCH_COMPARE_KEY")
	if k == "" {
		return nil
	}
	return http.Header{"Authorization": {"Bearer " + k}, "Content-Type": {"application/json"}}
}

// restAfterLoad waits a minute (10 s in quick mode) after the last load
// scenario and reads the node's RSS: issue 17 wants it back within 1.5×
// the rest figure by then.
func (b *bench) restAfterLoad(fp *Footprint, stopping *atomic.Bool) {
	wait := time.Minute
	if b.cfg.Quick {
		wait = 10 * time.Second
	}
	b.logf("(j) RSS at rest %v after the load", wait)
	for end := time.Now().Add(wait - 2*time.Second); time.Now().Before(end) && !stopping.Load(); {
		time.Sleep(250 * time.Millisecond)
	}
	if stopping.Load() {
		return
	}
	fp.RestAfterLoadS = wait.Seconds()
	fp.RSSMinuteAfterLoadMB, _ = rssMB(b.gw.Pid())
}
