package main

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestWrongToken(t *testing.T) {
	f := startFake(t)
	r := runCLI("", "--addr", f.addr, "--token", "wrong", "key", "list")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1", r.code)
	}
	if !strings.HasPrefix(r.stderr, "tollctl: invalid or missing admin token\n") || !strings.Contains(r.stderr, "TOLLGATE_TOKEN") {
		t.Errorf("stderr = %q", r.stderr)
	}
	if strings.Contains(r.stderr, "rpc error") || r.stdout != "" {
		t.Errorf("raw error or stdout: %q / %q", r.stderr, r.stdout)
	}
}

func TestTokenAndAddrFromEnv(t *testing.T) {
	f := startFake(t)
	t.Setenv(envAddr, f.addr)
	t.Setenv(envToken, "")
	r := runCLI("", "key", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "no admin token given") {
		t.Errorf("no token: exit %d stderr %q", r.code, r.stderr)
	}
	t.Setenv(envToken, testToken)
	if r := runCLI("", "key", "list"); r.code != 0 {
		t.Errorf("env token: exit %d stderr %q", r.code, r.stderr)
	}
	// Flags win over the environment.
	if r := runCLI("", "--token", "wrong", "key", "list"); r.code != 1 || !strings.Contains(r.stderr, "was rejected") {
		t.Errorf("flag token: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestUnreachableAddress(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens here now

	// A refused connection is retried, as the node may be restarting, but
	// only until --timeout; then the connection error is shown.
	start := time.Now()
	r := runCLI("", "--addr", addr, "--token", testToken, "--timeout", "700ms", "key", "list")
	if elapsed := time.Since(start); elapsed > 2500*time.Millisecond {
		t.Errorf("took %v despite --timeout 700ms", elapsed)
	}
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach tollgate at "+addr) || !strings.Contains(r.stderr, "is tollgate running") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestSilentServerTimesOut(t *testing.T) {
	// A listener that accepts connections but never speaks gRPC.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()

	start := time.Now()
	r := runCLI("", "--addr", lis.Addr().String(), "--token", testToken, "--timeout", "300ms", "model", "list")
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("took %v despite --timeout 300ms", elapsed)
	}
	if r.code != 1 || !strings.Contains(r.stderr, "tollctl: ") || !strings.Contains(r.stderr, "--addr") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	f := startFake(t)
	for _, args := range [][]string{
		{"frobnicate"},
		{"key", "frobnicate"},
		{"key", "list", "--bogus"},
		{"key", "create"},
		{"key", "create", "--name", "x", "--expires-in", "forever"},
		{"key", "create", "--name", "x", "--expires-in", "0"},
		{"key", "create", "--name", "x", "extra-arg"},
		{"key", "get"},
		{"key", "get", "a", "b"},
		{"key", "list", "-o", "yaml"},
		{"--timeout", "0s", "key", "list"},
		{"--timeout", "soon", "key", "list"},
		{"model", "remove"},
		{"credential", "delete"},
		{"cluster", "frobnicate"},
		{"cluster", "status", "extra"},
		{"cluster", "remove"},
		{"cluster", "remove", "a", "b"},
		{"cluster", "snapshot", "save"},
		{"cluster", "snapshot", "restore"},
		{"team", "frobnicate"},
		{"team", "get"},
		{"team", "delete"},
		{"spend", "frobnicate"},
		{"spend", "report", "--since", "later"},
		{"model", "prices", "a", "b"},
	} {
		r := f.run(t, args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
			continue
		}
		if !strings.HasPrefix(r.stderr, "tollctl: ") || !strings.Contains(r.stderr, "--help") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	r := runCLI("", "--help")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	for _, want := range []string{"Resource Commands:", "key ", "team ", "model ", "credential ", "Spend Commands:", "spend ", "Cluster Commands:", "cluster ", "Other Commands:", "version", "TOLLGATE_TOKEN"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := runCLI("", "key", "create", "--help"); r.code != 0 || !strings.Contains(r.stdout, "--expires-in") {
		t.Errorf("key create --help: exit %d\n%s", r.code, r.stdout)
	}
}

// Every command documents itself and its flags.
func TestCommandsAreDocumented(t *testing.T) {
	a := &app{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "completion" || c.Name() == "help" {
			return
		}
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("%s: needs Short, Long and Example", c.CommandPath())
		}
		c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			if fl.Usage == "" {
				t.Errorf("%s --%s: no usage text", c.CommandPath(), fl.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(a.rootCommand())
}

func TestVersion(t *testing.T) {
	r := runCLI("", "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "tollctl ") {
		t.Errorf("exit %d out %q", r.code, r.stdout)
	}
	m := decodeObject(t, runCLI("", "version", "-o", "json").stdout)
	if m["version"] == "" || m["go_version"] == nil {
		t.Errorf("json = %v", m)
	}
}
