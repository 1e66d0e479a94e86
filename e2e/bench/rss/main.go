// Command rss measures a Tollgate node's RSS at rest as scenario (j) of
// e2e/bench does (a fresh single node, the harness's routes and key, one
// request of each kind, then 2 s at rest, VmRSS), for one or more variants
// in alternation, and attributes the resident pages: the executable's pages
// by section and by Go package (from an unstripped build with the same
// layout), the anonymous ones by mapping and, with -pprof, by the Go
// runtime's own accounts and a heap profile.
//
//	go build -o /tmp/rss/ ./cmd/tollctl ./cmd/mockllm
//	CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags="-s -w" -o /tmp/rss/tollgate ./cmd/tollgate
//	CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -o /tmp/rss/tollgate.sym ./cmd/tollgate
//	go run ./e2e/bench/rss -bin /tmp/rss -attr -sym /tmp/rss/tollgate.sym
//	go run ./e2e/bench/rss -bin /tmp/rss -reps 5 -v 'base=' -v 'small=|GOGC=50|'
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/e2e/ports"
)

// variant is a way to run the node: a binary, more environment, more flags.
type variant struct {
	name, bin  string
	env, extra []string
	rss        []float64
}

type variants []*variant

func (v *variants) String() string { return fmt.Sprint(len(*v)) }

// Set parses name=binary|ENV=1 ENV=2|--flag value (empty binary: -bin's).
func (v *variants) Set(s string) error {
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want name=binary|env|flags, got %q", s)
	}
	f := strings.SplitN(rest, "|", 3)
	for len(f) < 3 {
		f = append(f, "")
	}
	*v = append(*v, &variant{name: name, bin: f[0], env: strings.Fields(f[1]), extra: strings.Fields(f[2])})
	return nil
}

func main() {
	var vs variants
	bin := flag.String("bin", "/tmp/rss", "directory holding tollgate, tollctl and mockllm")
	sym := flag.String("sym", "", "unstripped build of the same tollgate (same flags without -s -w), for -attr")
	reps := flag.Int("reps", 3, "rounds; each runs every variant once, in alternating order")
	rest := flag.Duration("rest", 2*time.Second, "time at rest before VmRSS is read (the harness waits 2s)")
	attr := flag.Bool("attr", false, "attribute the resident pages of the first variant (needs -sym)")
	load := flag.Int("load", 0, "requests (1 KiB chat, half streamed, 16 clients) to send before the rest: RSS at rest after load")
	prof := flag.String("pprof", "", "with -attr: also run the first variant with --pprof-addr and save its heap profile to this file")
	flag.Var(&vs, "v", "variant name=binary|ENV=v ...|--flag v ... (repeatable; default: base=)")
	flag.Parse()
	if len(vs) == 0 {
		vs = variants{{name: "base"}}
	}
	for _, v := range vs {
		if v.bin == "" {
			v.bin = filepath.Join(*bin, "tollgate")
		}
	}
	if err := run(*bin, *sym, *prof, vs, *reps, *rest, *attr, *load); err != nil {
		fmt.Fprintln(os.Stderr, "rss:", err)
		os.Exit(1)
	}
}

func run(bin, sym, prof string, vs variants, reps int, rest time.Duration, attr bool, load int) error {
	tmp, err := os.MkdirTemp("", "rss-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	mockAddr, err := ports.Addr()
	if err != nil {
		return err
	}
	deadAddr, err := ports.Addr()
	if err != nil {
		return err
	}
	mock := exec.Command(filepath.Join(bin, "mockllm"), "--addr", mockAddr, "--quiet")
	if err := mock.Start(); err != nil {
		return err
	}
	defer func() { _ = mock.Process.Kill(); _ = mock.Wait() }()
	if err := waitFor("http://"+mockAddr+"/v1/models", 30*time.Second); err != nil {
		return err
	}
	env := &setup{tollctl: filepath.Join(bin, "tollctl"), tmp: tmp, mock: "http://" + mockAddr + "/v1", dead: "http://" + deadAddr + "/v1", rest: rest, load: load}
	if attr {
		if err := env.attribute(vs[0], sym, prof); err != nil {
			return err
		}
	}
	for r := 0; r < reps; r++ {
		order := slices.Clone(vs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range order {
			mb, err := env.measure(v, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			v.rss = append(v.rss, mb)
			fmt.Fprintf(os.Stderr, "round %d %-12s %.1f MB  (load %s)\n", r+1, v.name, mb, loadavg())
		}
	}
	if reps > 0 {
		fmt.Println("| variant | RSS at rest, MiB (median) | rounds |")
		fmt.Println("|---|---|---|")
		for _, v := range vs {
			fmt.Printf("| %s | %.1f | %s |\n", v.name, median(v.rss), fmtAll(v.rss))
		}
	}
	return nil
}

// setup is what every measured node shares.
type setup struct {
	tollctl, tmp, mock, dead string
	rest                     time.Duration
	load                     int // requests sent before the rest (0: none, as scenario j)
}

// measure starts v, configures it, rests, reads VmRSS in MiB and, if at is
// not nil, calls it on the node before stopping it.
func (s *setup) measure(v *variant, at func(*node) error) (float64, error) {
	n, err := startNode(v.bin, s.tollctl, s.tmp, v.env, v.extra)
	if err != nil {
		return 0, err
	}
	defer n.stop()
	secret, err := n.configure(s.mock, s.dead)
	if err != nil {
		return 0, err
	}
	if s.load > 0 {
		t0 := time.Now()
		if err := n.load(secret, s.load); err != nil {
			return 0, err
		}
		fmt.Fprintf(os.Stderr, "  %s: %d requests at %.0f req/s\n", v.name, s.load, float64(s.load)/time.Since(t0).Seconds())
	}
	time.Sleep(s.rest)
	kb, err := statusKB(n.pid(), "VmRSS:")
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "  %s: %d minor page faults, CPU %v since start\n", v.name, minorFaults(n.pid()), cpuTime(n.pid()))
	if at != nil {
		if err := at(n); err != nil {
			return 0, err
		}
	}
	return float64(kb) / 1024, nil
}

// statusKB reads one kB field of /proc/PID/status.
func statusKB(pid int, field string) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			var kb uint64
			_, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// statFields are the fields of /proc/PID/stat after the command name.
func statFields(pid int) []string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.Fields(rest)
}

// minorFaults is the process's count of minor page faults (field 10).
func minorFaults(pid int) uint64 {
	var n uint64
	if f := statFields(pid); len(f) > 7 {
		fmt.Sscan(f[7], &n)
	}
	return n
}

// cpuTime is the process's user and system CPU time (fields 14, 15, in
// clock ticks of 10 ms).
func cpuTime(pid int) time.Duration {
	var u, s uint64
	if f := statFields(pid); len(f) > 12 {
		fmt.Sscan(f[11], &u)
		fmt.Sscan(f[12], &s)
	}
	return time.Duration(u+s) * 10 * time.Millisecond
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtAll(xs []float64) string {
	var out []string
	for _, x := range xs {
		out = append(out, fmt.Sprintf("%.1f", x))
	}
	return strings.Join(out, ", ")
}

// fetch GETs url and returns its body.
func fetch(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
