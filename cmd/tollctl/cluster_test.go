package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

const (
	mStatus  = tollgatev1.ClusterService_Status_FullMethodName
	mRemove  = tollgatev1.ClusterService_RemoveNode_FullMethodName
	mRestore = tollgatev1.ClusterService_RestoreSnapshot_FullMethodName
	mSetCred = tollgatev1.CredentialService_SetCredential_FullMethodName
)

var errNoLeader = status.Error(codes.Unavailable, "no leader is known right now (election in progress?); retry")

// fields splits each non-empty line of s into fields.
func fields(s string) [][]string {
	var out [][]string
	for line := range strings.Lines(s) {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f)
		}
	}
	return out
}

func TestClusterStatusTable(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "cluster", "status")
	for _, want := range []string{"Node:", "Leader:", "Term:", "Applied index:", "Commit index:", "Last index:", "Raft state:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	head, table, ok := strings.Cut(r.stdout, "\n\n")
	if !ok {
		t.Fatalf("no blank line between header and members:\n%s", r.stdout)
	}
	if got := fields(head); !slices.Equal(got[1], []string{"Leader:", "n1"}) || !slices.Equal(got[2], []string{"Term:", "7"}) ||
		!slices.Equal(got[3], []string{"Applied", "index:", "42"}) || !slices.Equal(got[5], []string{"Last", "index:", "44"}) ||
		!slices.Equal(got[6], []string{"Raft", "state:", "leader"}) {
		t.Errorf("header:\n%s", head)
	}
	rows := fields(table)
	if len(rows) != 5 || strings.Join(rows[0], " ") != "ID ROLE LEADER GOSSIP HEALTH RAFT-ADDR HTTP-ADDR ADMIN-ADDR VERSION" {
		t.Fatalf("members:\n%s", table)
	}
	if want := "n1 voter yes alive healthy 10.0.0.1:4300 10.0.0.1:4000 10.0.0.1:4100 v1.2.0"; strings.Join(rows[1], " ") != want {
		t.Errorf("row n1 = %v", rows[1])
	}
	if want := "n3 nonvoter no unknown unreachable 10.0.0.3:4300 - - -"; strings.Join(rows[3], " ") != want {
		t.Errorf("row n3 = %v", rows[3])
	}
	if !strings.Contains(table, "not in raft") {
		t.Errorf("n4's health missing:\n%s", table)
	}
	if r.stderr != "" {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestClusterStatusNoLeader(t *testing.T) {
	f := startFake(t)
	f.cluster.mu.Lock()
	f.cluster.status.Leader = ""
	f.cluster.status.RaftState = "candidate"
	f.cluster.mu.Unlock()
	r := f.mustRun(t, "cluster", "status")
	if !strings.Contains(r.stdout, "none known") {
		t.Errorf("status:\n%s", r.stdout)
	}
	if m := decodeObject(t, f.mustRun(t, "cluster", "status", "-o", "json").stdout); m["leader"] != "" {
		t.Errorf("leader = %v, want empty string", m["leader"])
	}
}

func TestClusterStatusJSON(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "cluster", "status", "-o", "json")
	m := decodeObject(t, r.stdout)
	if m["leader"] != "n1" || m["node"] != "n1" || m["raft_state"] != "leader" || m["term"] != "7" || m["applied_index"] != "42" {
		t.Errorf("json = %v", m)
	}
	members, ok := m["members"].([]any)
	if !ok || len(members) != 4 {
		t.Fatalf("members = %v", m["members"])
	}
	var got []string
	for _, x := range members {
		mem := x.(map[string]any)
		for _, field := range []string{"id", "role", "leader", "gossip_state", "health", "raft_address", "gossip_address", "http_address", "admin_address"} {
			if _, ok := mem[field]; !ok {
				t.Errorf("member %v lacks %q", mem["id"], field)
			}
		}
		got = append(got, mem["id"].(string)+"/"+mem["role"].(string)+"/"+mem["health"].(string))
	}
	want := []string{"n1/voter/healthy", "n2/voter/healthy", "n3/nonvoter/unreachable", "n4/none/not in raft"}
	if !slices.Equal(got, want) {
		t.Errorf("members = %v, want %v", got, want)
	}
	if members[0].(map[string]any)["leader"] != true || members[1].(map[string]any)["leader"] != false {
		t.Errorf("leader flags: %v", members)
	}
}

func TestClusterMembers(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "cluster", "members")
	rows := fields(r.stdout)
	if len(rows) != 5 || rows[0][0] != "ID" || rows[2][0] != "n2" || strings.Contains(r.stdout, "Leader:") {
		t.Errorf("members:\n%s", r.stdout)
	}
	ms := decodeArray(t, f.mustRun(t, "cluster", "members", "-o", "json").stdout)
	if len(ms) != 4 || ms[0]["id"] != "n1" || ms[0]["role"] != "voter" || ms[3]["health"] != "not in raft" {
		t.Errorf("json = %v", ms)
	}

	f.cluster.mu.Lock()
	f.cluster.status.Members = nil
	f.cluster.mu.Unlock()
	if r := f.mustRun(t, "cluster", "members"); r.stdout != "No members.\n" {
		t.Errorf("empty: %q", r.stdout)
	}
	if r := f.mustRun(t, "cluster", "members", "-o", "json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("empty json: %q", r.stdout)
	}
}

func TestClusterRemove(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "cluster", "remove", "n3")
	if r.stdout != "Removed node n3 from the cluster; its budget leases were returned.\n" || r.stderr != "" {
		t.Errorf("out %q err %q", r.stdout, r.stderr)
	}
	if got := f.cluster.removedNodes(); !slices.Equal(got, []string{"n3"}) {
		t.Errorf("removed = %v", got)
	}
	if r := f.mustRun(t, "cluster", "remove", "n2", "-o", "json"); !strings.Contains(r.stdout, `"not_member": false`) {
		t.Errorf("json: %q", r.stdout)
	}
	// A node that is no longer a member: its remaining leases return.
	r = f.mustRun(t, "cluster", "remove", "n9")
	if !strings.Contains(r.stdout, "Node n9 is not a member of the cluster (removed already, or a typo?); any budget leases it held were returned.") {
		t.Errorf("not a member: out %q err %q", r.stdout, r.stderr)
	}
	if r := f.mustRun(t, "cluster", "remove", "n9", "-o", "json"); !strings.Contains(r.stdout, `"not_member": true`) {
		t.Errorf("not a member, json: %q", r.stdout)
	}
	if r := f.run(t, "cluster", "remove"); r.code != 2 || !strings.Contains(r.stderr, "missing argument NODE") {
		t.Errorf("no arg: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestSnapshotSave(t *testing.T) {
	f := startFake(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")
	// An existing file is replaced, and ends up private.
	if err := os.WriteFile(file, []byte("old contents that are longer than the snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := f.mustRun(t, "cluster", "snapshot", "save", file)
	want := f.cluster.snapshot
	got, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file = %q (%v), want %q", got, err, want)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if !strings.Contains(r.stdout, "index 42") || !strings.Contains(r.stdout, fmt.Sprintf("(%d bytes)", len(want))) || !strings.Contains(r.stdout, file) {
		t.Errorf("stdout = %q", r.stdout)
	}

	m := decodeObject(t, f.mustRun(t, "cluster", "snapshot", "save", file, "-o", "json").stdout)
	if m["file"] != file || m["index"] != float64(42) || m["bytes"] != float64(len(want)) {
		t.Errorf("json = %v", m)
	}

	// "-" writes exactly the snapshot to stdout and the summary to stderr.
	for _, args := range [][]string{{"cluster", "snapshot", "save", "-"}, {"cluster", "snapshot", "save", "-", "-o", "json"}} {
		r = f.mustRun(t, args...)
		if r.stdout != string(want) {
			t.Errorf("%v: stdout = %q, want %q", args, r.stdout, want)
		}
		if !strings.Contains(r.stderr, "index 42") {
			t.Errorf("%v: stderr = %q", args, r.stderr)
		}
	}

	r = f.run(t, "cluster", "snapshot", "save", filepath.Join(dir, "no-such-dir", "x.snap"))
	if r.code != 1 || !strings.Contains(r.stderr, "writing the snapshot") {
		t.Errorf("bad dir: exit %d stderr %q", r.code, r.stderr)
	}
}

// Snapshots beyond gRPC's default 4 MiB message limit go both ways.
func TestSnapshotLarge(t *testing.T) {
	f := startFake(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16)
	f.cluster.setSnapshot(big)
	file := filepath.Join(t.TempDir(), "big.snap")
	// A generous --timeout: copying megabytes under -race on a busy machine
	// can be slow.
	f.mustRun(t, "--timeout", "60s", "cluster", "snapshot", "save", file)
	if got, _ := os.ReadFile(file); !bytes.Equal(got, big) {
		t.Fatalf("saved %d bytes, want %d", len(got), len(big))
	}
	f.mustRun(t, "--timeout", "60s", "cluster", "snapshot", "restore", file, "--yes")
	if got := f.cluster.restoredData(); !bytes.Equal(got, big) {
		t.Fatalf("restored %d bytes, want %d", len(got), len(big))
	}
}

func TestSnapshotRestore(t *testing.T) {
	f := startFake(t)
	data := []byte("\x0a\x05hello\x00\xffsnapshot")
	file := filepath.Join(t.TempDir(), "backup.snap")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}

	// Without a terminal, --yes is required.
	for _, args := range [][]string{
		{"cluster", "snapshot", "restore", file},
		{"cluster", "snapshot", "restore", "-"},
	} {
		r := f.runStdin(t, "yes\n", args...)
		if r.code != 2 || !strings.Contains(r.stderr, restoreWarning) || !strings.Contains(r.stderr, "--yes") {
			t.Errorf("%v: exit %d stderr %q", args, r.code, r.stderr)
		}
	}
	if n := f.inject.count(mRestore); n != 0 {
		t.Fatalf("restore reached the server %d times without --yes", n)
	}

	r := f.mustRun(t, "cluster", "snapshot", "restore", file, "--yes")
	if got := f.cluster.restoredData(); !bytes.Equal(got, data) {
		t.Errorf("server got %q, want %q", got, data)
	}
	if r.stdout != "Restored snapshot from "+file+": 3 keys, 2 routes, 1 credentials.\n" {
		t.Errorf("stdout = %q", r.stdout)
	}

	stdinData := "from stdin \x00\x01\x02"
	r = f.runStdin(t, stdinData, "cluster", "snapshot", "restore", "-", "-y", "-o", "json")
	if r.code != 0 {
		t.Fatalf("stdin: exit %d stderr %q", r.code, r.stderr)
	}
	if got := f.cluster.restoredData(); string(got) != stdinData {
		t.Errorf("server got %q, want %q", got, stdinData)
	}
	if m := decodeObject(t, r.stdout); m["keys"] != "3" || m["routes"] != "2" || m["credentials"] != "1" {
		t.Errorf("json = %v", m)
	}

	empty := filepath.Join(t.TempDir(), "empty.snap")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"cluster", "snapshot", "restore", empty, "--yes"},
		{"cluster", "snapshot", "restore", filepath.Join(t.TempDir(), "missing.snap"), "--yes"},
		{"cluster", "snapshot", "restore", "--yes"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if n := f.inject.count(mRestore); n != 2 {
		t.Errorf("server saw %d restores, want 2", n)
	}
}

func TestRetryUnavailable(t *testing.T) {
	f := startFake(t)
	f.inject.failNext(mStatus, errNoLeader, status.Error(codes.Unavailable, "node restarting"))
	r := f.mustRun(t, "cluster", "status", "-o", "json")
	if n := f.inject.count(mStatus); n != 3 {
		t.Errorf("server saw %d calls, want 3", n)
	}
	if r.stderr != "" || decodeObject(t, r.stdout)["leader"] != "n1" {
		t.Errorf("out %q err %q", r.stdout, r.stderr)
	}

	// Writes of every service are retried too: a follower returns
	// Unavailable while no leader is known.
	f.inject.failNext(mSetCred, errNoLeader)
	if r := f.runStdin(t, "sk-1234", "credential", "set", "openai"); r.code != 0 || r.stderr != "" {
		t.Errorf("credential set: exit %d stderr %q", r.code, r.stderr)
	}
	if n := f.inject.count(mSetCred); n != 2 {
		t.Errorf("server saw %d SetCredential calls, want 2", n)
	}
}

func TestRetryGivesUpAtTimeout(t *testing.T) {
	f := startFake(t)
	f.inject.failAlways(mStatus, errNoLeader)
	start := time.Now()
	r := f.run(t, "--timeout", "500ms", "cluster", "status")
	elapsed := time.Since(start)
	// Waits of 50-100 ms and 100-200 ms always fit before the deadline;
	// the third (200-400 ms) may not, and then the client stops early
	// rather than sleep past it.
	if elapsed > 2*time.Second || elapsed < 140*time.Millisecond {
		t.Errorf("took %v with --timeout 500ms", elapsed)
	}
	if n := f.inject.count(mStatus); n < 3 {
		t.Errorf("server saw %d Status calls, want at least 3", n)
	}
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	// The last error is shown, not a bare deadline, with the usual hint.
	if !strings.Contains(r.stderr, "no leader is known right now") || !strings.Contains(r.stderr, "hint:") ||
		strings.Count(r.stderr, "tollctl:") != 1 {
		t.Errorf("stderr = %q", r.stderr)
	}
	if n := f.inject.count(mStatus); n < 3 {
		t.Errorf("server saw %d calls; expected retries", n)
	}
}

func TestNoRetryForOtherCodes(t *testing.T) {
	for _, code := range []codes.Code{codes.FailedPrecondition, codes.Internal, codes.NotFound, codes.DeadlineExceeded, codes.ResourceExhausted} {
		f := startFake(t)
		f.inject.failNext(mRemove, status.Error(code, "nope"), status.Error(code, "nope"))
		r := f.run(t, "cluster", "remove", "n2")
		if r.code != 1 {
			t.Errorf("%v: exit %d, want 1", code, r.code)
		}
		if n := f.inject.count(mRemove); n != 1 {
			t.Errorf("%v: server saw %d calls, want 1", code, n)
		}
	}
}

// A node that is down when tollctl starts and comes up within --timeout is
// reached: refused connections are retried.
func TestRetryWhileNodeRestarts(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()

	up := make(chan *fake, 1)
	go func() {
		time.Sleep(400 * time.Millisecond)
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			up <- nil
			return
		}
		up <- serveFake(t, lis)
	}()
	r := runCLI("", "--addr", addr, "--token", testToken, "--timeout", "5s", "cluster", "members", "-o", "json")
	f := <-up
	if f == nil {
		t.Skip("could not listen on the same port again")
	}
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if ms := decodeArray(t, r.stdout); len(ms) != 4 {
		t.Errorf("members = %v", ms)
	}
}

func TestLaggingWarning(t *testing.T) {
	f := startFake(t)
	const want = "warning: not yet applied on node(s) n2, n3 (they lag or are unreachable)\n"

	f.inject.setLagging("n2,n3")
	r := f.mustRun(t, "cluster", "remove", "n3")
	if r.stderr != want || r.stdout != "Removed node n3 from the cluster; its budget leases were returned.\n" {
		t.Errorf("remove: out %q err %q", r.stdout, r.stderr)
	}
	r = f.runStdin(t, "sk-1234", "credential", "set", "openai", "-o", "json")
	if r.code != 0 || r.stderr != want {
		t.Errorf("credential set: exit %d err %q", r.code, r.stderr)
	}
	decodeObject(t, r.stdout) // stdout stays valid JSON

	f.inject.setLagging("")
	if r := f.mustRun(t, "cluster", "remove", "n2"); r.stderr != "" {
		t.Errorf("no lag: stderr %q", r.stderr)
	}
}
