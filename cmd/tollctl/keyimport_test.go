package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/node/admin"
	"github.com/tollgate/tollgate/raftstore"
)

// startRealAdmin serves the real admin API over a real single-node Raft
// store, for commands whose behaviour lives in the store.
func startRealAdmin(t *testing.T) (addr string, st *raftstore.Store) {
	t.Helper()
	st, err := raftstore.Open(raftstore.Config{
		Dir: t.TempDir(), NodeID: "n1", BindAddr: "127.0.0.1:0", Bootstrap: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LogLevel: "error",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	srv := admin.New(admin.Config{Store: st, BootstrapToken: testToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	g := grpc.NewServer(grpc.UnaryInterceptor(srv.UnaryInterceptor()))
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String(), st
}

func TestKeyImportRunsAgainWithoutDuplicates(t *testing.T) {
	addr, st := startRealAdmin(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "customers.jsonl")
	var b strings.Builder
	b.WriteString("# customers\n\n")
	for i := range 7 {
		b.WriteString(`{"name":"cust-` + string(rune('a'+i)) + `","models":["gpt-*"],"budget":"2.50","period":"month","rpm":60}` + "\n")
	}
	b.WriteString(`{"name":"migrated","secret":"sk-old-gateway-0123456789"}` + "\n")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := filepath.Join(dir, "secrets.jsonl")
	args := []string{"--addr", addr, "--token", testToken, "--timeout", "10s", "-o", "json",
		"key", "import", file, "--batch", "3", "--secrets-out", secrets}

	r := runCLI("", args...)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "{\n  \"imported\": 8,\n  \"skipped\": 0\n}" {
		t.Fatalf("first run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(secrets)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secrets file: %v, mode %v", err, fi.Mode())
	}
	fh, _ := os.Open(secrets)
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	n := 0
	for sc.Scan() {
		var s struct{ Name, ID, Secret string }
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		if k := st.State().KeyByHash(raftstore.HashSecret(s.Secret)); k == nil || k.Name != s.Name || k.ID != s.ID {
			t.Fatalf("secret written for %s does not open it: %+v", s.Name, k)
		}
		n++
	}
	if n != 7 {
		t.Fatalf("%d secrets written, want 7 (the migrated key keeps its own)", n)
	}
	if k := st.State().KeyByHash(raftstore.HashSecret("sk-old-gateway-0123456789")); k == nil || k.Name != "migrated" {
		t.Fatalf("migrated secret resolves to %+v", k)
	}

	r = runCLI("", args...)
	if r.code != 0 || !strings.Contains(r.stdout, `"skipped": 8`) || !strings.Contains(r.stdout, `"imported": 0`) {
		t.Fatalf("second run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if got := len(st.State().Keys()); got != 8 {
		t.Fatalf("%d keys after two runs, want 8", got)
	}
}

func TestKeyImportReportsBadLinesAndSendsNothing(t *testing.T) {
	addr, st := startRealAdmin(t)
	file := filepath.Join(t.TempDir(), "bad.jsonl")
	body := `{"name":"ok","secret":"sk-0123456789abcdefghij"}
{"name":"bad-budget","budget":"ten","period":"day","secret":"sk-0123456789abcdefghik"}
{"name":"ok","secret":"sk-0123456789abcdefghil"}
{"nme":"typo"}
not json
`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI("", "--addr", addr, "--token", testToken, "key", "import", file)
	if r.code == 0 {
		t.Fatal("import of a bad file succeeded")
	}
	for _, want := range []string{"nothing imported", "line 2:", "line 3:", "also on line 1", "line 4:", "line 5:"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := len(st.State().Keys()); n != 0 {
		t.Fatalf("%d keys created from a bad file", n)
	}

	// Without secrets in the file, the drawn ones need somewhere to go.
	if err := os.WriteFile(file, []byte(`{"name":"x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI("", "--addr", addr, "--token", testToken, "key", "import", file)
	if r.code == 0 || !strings.Contains(r.stderr, "--secrets-out") {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
}
