package main

import (
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseCompareReadsNamedBaseURLs(t *testing.T) {
	refs, err := parseCompare(" litellm=http://127.0.0.1:8080/v1/ , gomodel=https://127.0.0.1:9000/v1")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[0].Name != "litellm" || refs[0].Base != "http://127.0.0.1:8080/v1" || refs[1].Name != "gomodel" || refs[0].Pid() != 0 {
		t.Fatalf("refs: %+v", refs)
	}
	if refs, err := parseCompare(""); err != nil || refs != nil {
		t.Errorf("empty: %v %v", refs, err)
	}
}

func TestParseCompareRefusesBadEntries(t *testing.T) {
	for _, s := range []string{"litellm", "=http://127.0.0.1:1/v1", "x=", "haproxy=http://127.0.0.1:1/v1", "tollgate=http://127.0.0.1:1", "fastproxy=http://127.0.0.1:1/v1",
		"x=ftp://127.0.0.1/v1", "x=127.0.0.1:8080", "a b=http://127.0.0.1:1", "x=http://127.0.0.1:1,x=http://127.0.0.1:2"} {
		if _, err := parseCompare(s); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
}

func TestParseRefs(t *testing.T) {
	for s, want := range map[string][]string{"haproxy,goproxy": {"haproxy", "goproxy"}, "goproxy, goproxy": {"goproxy"}, "none": nil, "": nil,
		"haproxy,goproxy,fastproxy": {"haproxy", "goproxy", "fastproxy"}} {
		got, err := parseRefs(s)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v %v, want %v", s, got, err, want)
		}
	}
	if _, err := parseRefs("nginx"); err == nil {
		t.Error("an unknown reference was accepted")
	}
}

func TestRefFlagsReachTheConfig(t *testing.T) {
	fs := flag.CommandLine
	defer func() { flag.CommandLine = fs }()
	flag.CommandLine = flag.NewFlagSet("bench", flag.ContinueOnError)
	t.Setenv("TOLLGATE_BENCH_COMPARE", "gw=http://127.0.0.1:1/v1")
	o := &options{}
	o.refFlags()
	if err := flag.CommandLine.Parse([]string{"-refs", "haproxy", "-profile", "/tmp/p"}); err != nil {
		t.Fatal(err)
	}
	o.clients, o.rates, o.scenarios = "1", "1", "a"
	cfg := Config{}
	if err := o.refConfig(&cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Refs, []string{"haproxy"}) || len(cfg.Compare) != 1 || cfg.Compare[0].Name != "gw" || cfg.ProfileDir != "/tmp/p" {
		t.Errorf("config: %+v", cfg)
	}
}

func TestLineupAlternatesAndSkipsFailover(t *testing.T) {
	b := &bench{mockBase: "http://m/v1", refs: []*Ref{{Name: "haproxy", Base: "http://h/v1"}, {Name: "x", Base: "http://x/v1"}}}
	d := &Target{Name: "direct", URL: "http://m/v1/chat/completions"}
	g := &Target{Name: "tollgate", URL: "http://g/v1/chat/completions"}
	names := func(l lineup) (out []string) {
		for _, e := range l {
			out = append(out, e.t.Name)
		}
		return out
	}
	l := b.lineup("a", d, g)
	if got := names(l.order(0)); !slices.Equal(got, []string{"direct", "tollgate", "haproxy", "x"}) {
		t.Errorf("even: %v", got)
	}
	if got := names(l.order(1)); !slices.Equal(got, []string{"x", "haproxy", "tollgate", "direct"}) {
		t.Errorf("odd: %v", got)
	}
	if l[2].t.URL != "http://h/v1/chat/completions" {
		t.Errorf("haproxy URL %s", l[2].t.URL)
	}
	if got := names(b.lineup("i", d, g)); !slices.Equal(got, []string{"direct", "tollgate"}) {
		t.Errorf("failover: %v", got)
	}
	p := &Point{}
	for _, e := range l {
		p.record(e.t, d, g, &RunResult{Target: e.t.Name})
	}
	if len(p.DirectRuns) != 1 || len(p.GatewayRuns) != 1 || len(p.RefRuns["haproxy"]) != 1 || len(p.RefRuns["x"]) != 1 {
		t.Errorf("recorded: %+v", p)
	}
}

func TestStreamLevelAddedOnce(t *testing.T) {
	if got := withLevel([]int{1, 10, 50}, 16); !slices.Equal(got, []int{1, 10, 16, 50}) {
		t.Errorf("%v", got)
	}
	if got := withLevel([]int{16}, 16); !slices.Equal(got, []int{16}) {
		t.Errorf("%v", got)
	}
}

// pathEcho is an upstream that answers with the path it was asked for.
func pathEcho(t *testing.T) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"path":"`+r.URL.Path+`"}`)
	}))
	t.Cleanup(up.Close)
	return strings.TrimPrefix(up.URL, "http://")
}

// checkRelays posts to each reference and wants pathEcho's answer.
func checkRelays(t *testing.T, refs []*Ref) {
	t.Helper()
	for _, ref := range refs {
		resp, err := http.Post(ref.Base+"/chat/completions", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != `{"path":"/v1/chat/completions"}` || ref.Pid() <= 0 || ref.What == "" {
			t.Errorf("%s: %d %s pid %d", ref.Name, resp.StatusCode, body, ref.Pid())
		}
		ref.proc.kill()
	}
}

// TestHAProxyRefRelaysToTheUpstream starts the real HAProxy row in front
// of a loopback server (skipped where haproxy is not installed).
func TestHAProxyRefRelaysToTheUpstream(t *testing.T) {
	if _, err := haproxyPath(); err != nil {
		t.Skip(err)
	}
	defer killChildren()
	refs, err := startRefs([]string{RefHAProxy}, nil, t.TempDir(), pathEcho(t), "")
	if err != nil {
		t.Fatal(err)
	}
	checkRelays(t, refs)
}

// TestGoRefsBuildAndRelayToTheUpstream builds the Go references as the
// harness does and starts their rows in front of a loopback server.
func TestGoRefsBuildAndRelayToTheUpstream(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(os.PathSeparator)}, goRefPackages()...)...)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	defer killChildren()
	refs, err := startRefs([]string{RefGoProxy, RefFastProxy}, &Binaries{Dir: dir}, t.TempDir(), pathEcho(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[1].Name != RefFastProxy || !strings.Contains(refs[1].What, "fasthttp") {
		t.Fatalf("refs: %+v", refs)
	}
	checkRelays(t, refs)
}
