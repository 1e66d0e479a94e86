package raftstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// walConfig is testConfig for a new data dir that keeps its log in the WAL.
func walConfig(dir string) Config {
	cfg := testConfig(dir)
	cfg.LogStore = LogStoreWAL
	return cfg
}

// A new data dir gets the bolt log by default; one with both logs, or an
// unknown store asked for, does not open.
func TestLogStoreChoice(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.LogStore = "" // the default, also in a run of the suite on the WAL
	s := openReady(t, cfg)
	if got := s.LogStoreKind(); got != LogStoreBolt {
		t.Fatalf("default LogStoreKind() = %q, want %q", got, LogStoreBolt)
	}
	closeStore(t, s)
	s = openReady(t, walConfig(dir)) // the data dir keeps its store
	if got := s.LogStoreKind(); got != LogStoreBolt {
		t.Fatalf("reopened asking for the WAL: LogStoreKind() = %q, want %q", got, LogStoreBolt)
	}
	closeStore(t, s)
	if err := os.Mkdir(filepath.Join(dir, walDirName), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testConfig(dir)); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("a data dir with raft.db and wal/ opened: %v", err)
	}
	cfg = testConfig(t.TempDir())
	cfg.LogStore = "rocks"
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "unknown Raft log store") {
		t.Fatalf("an unknown log store: %v", err)
	}
}

// A new data dir asking for the WAL keeps its log there (no raft.db), and a store
// closed and opened again there finds everything it applied.
func TestNewDataDirUsesWALAndReopens(t *testing.T) {
	dir := t.TempDir()
	cfg := walConfig(dir)
	s := openReady(t, cfg)
	if got := s.LogStoreKind(); got != LogStoreWAL {
		t.Fatalf("LogStoreKind() = %q, want %q", got, LogStoreWAL)
	}
	waitLeader(t, s)
	populate(t, s, "a")
	closeStore(t, s)
	if _, err := os.Stat(filepath.Join(dir, boltFileName)); !os.IsNotExist(err) {
		t.Fatalf("a new data dir has %s (err %v)", boltFileName, err)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, walDirName, "*.wal")); len(segs) == 0 {
		t.Fatal("no WAL segment in the data dir")
	}

	s = openReady(t, cfg)
	defer closeStore(t, s)
	if got := s.LogStoreKind(); got != LogStoreWAL {
		t.Fatalf("reopened: LogStoreKind() = %q, want %q", got, LogStoreWAL)
	}
	checkPopulated(t, s.State(), "a")
	waitLeader(t, s)
	mustApply(t, s, createKeyCmd("after", "after"))
}

// The previous release's data dir (a bolt raft.db) keeps its bolt log: it
// opens, serves its keys and takes new writes, and no WAL appears.
func TestDataDirOfPreviousReleaseKeepsItsBoltLog(t *testing.T) {
	want := readManifest(t)
	dir := filepath.Join(copyDir(t, "testdata/v0-datadir"), "raft")
	cfg := testConfig(dir)
	cfg.NodeID, cfg.Bootstrap = want.NodeID, false
	s := openReady(t, cfg)
	if got := s.LogStoreKind(); got != LogStoreBolt {
		t.Fatalf("LogStoreKind() = %q, want %q", got, LogStoreBolt)
	}
	waitLeader(t, s)
	if got := s.State().KeyCount(); got != len(want.Keys) {
		t.Fatalf("%d keys, want %d", got, len(want.Keys))
	}
	mustApply(t, s, createKeyCmd("new-after-upgrade", "new-secret"))
	closeStore(t, s)
	if _, err := os.Stat(filepath.Join(dir, walDirName)); !os.IsNotExist(err) {
		t.Fatalf("the old data dir got a %s dir (err %v)", walDirName, err)
	}
	s = openReady(t, cfg)
	defer closeStore(t, s)
	if s.State().KeyByHash(HashSecret("new-secret")) == nil {
		t.Fatal("the key written after the upgrade is gone after a restart")
	}
}

// A compacted entry is gone from the WAL as Raft sees it, even while its
// segment still holds it, so a leader sends a lagging follower its
// snapshot instead.
func TestWALGetLogBelowFirstIndexIsNotFound(t *testing.T) {
	ls := openTestLogStore(t, t.TempDir())
	defer ls.Close()
	appendLogs(t, ls, 1, 10, 1)
	if err := ls.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := ls.GetLog(5, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog(5) after compaction: err = %v, want ErrLogNotFound", err)
	}
	if err := ls.GetLog(6, &l); err != nil || l.Data[0] != 6 {
		t.Fatalf("GetLog(6) = %v, %v", l.Data, err)
	}
}

const killDirEnv = "TOLLGATE_TEST_KILL_DIR"

// killedWriter is the process TestKilledDuringAppendsKeepsAcknowledgedEntries
// kills: it writes keys one after another and prints each one's id once
// Apply has returned it (acknowledged), until it is killed.
func killedWriter(dir string) {
	cfg := walConfig(dir)
	cfg.LogLevel = "off"
	s, err := Open(cfg)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for i := 0; i < 100_000; i++ { // bounded; the parent kills it far sooner
		id := "k" + strconv.Itoa(i)
		if _, err := s.Apply(ctx, createKeyCmd(id, "s-"+id)); err != nil {
			continue // not leader yet: not acknowledged, try again
		}
		fmt.Println("acked", id)
	}
}

func TestKillHelperProcess(t *testing.T) {
	if dir := os.Getenv(killDirEnv); dir != "" {
		killedWriter(dir)
		os.Exit(0)
	}
	t.Skip("helper process of TestKilledDuringAppendsKeepsAcknowledgedEntries")
}

// A node killed with SIGKILL in the middle of appends, which rotate
// through small WAL segments, keeps every entry it acknowledged after a
// restart.
func TestKilledDuringAppendsKeepsAcknowledgedEntries(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), killDirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(out)
	for len(acked) < 300 && sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "acked "); ok {
			acked = append(acked, id)
		} else if strings.HasPrefix(line, "error") {
			t.Fatalf("writer: %s", line)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // what it acknowledged before the kill landed
		if id, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
			acked = append(acked, id)
		}
	}
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("the writer acknowledged only %d keys", len(acked))
	}

	if segs, _ := filepath.Glob(filepath.Join(dir, walDirName, "*.wal")); len(segs) < 2 {
		t.Fatalf("the writer filled %d WAL segment(s); the kill should land among rotations", len(segs))
	}
	s := openReady(t, walConfig(dir))
	defer closeStore(t, s)
	if err := s.WaitCaughtUp(ctxT(t), s.lastIndexAtOpen); err != nil {
		t.Fatal(err)
	}
	st := s.State()
	for _, id := range acked {
		if st.KeyByHash(HashSecret("s-"+id)) == nil {
			t.Fatalf("key %s was acknowledged before the kill but is gone after the restart (%d acknowledged)", id, len(acked))
		}
	}
	t.Logf("%d acknowledged keys all present after kill -9", len(acked))
}

// openTestLogStore opens dir's log store, failing the test on an error.
func openTestLogStore(t *testing.T, dir string) logStore {
	t.Helper()
	ls, _, err := openLogStore(dir, hclog.NewNullLogger(), 0, LogStoreWAL)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// appendLogs stores entries from..to of term, one append each.
func appendLogs(t *testing.T, ls logStore, from, to, term uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		l := &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte{byte(i), byte(term)}}
		if err := ls.StoreLogs([]*raft.Log{l}); err != nil {
			t.Fatal(err)
		}
	}
}

// A follower that drops a conflicting suffix (Raft's DeleteRange up to
// LastIndex) and appends the leader's entries still reads the entries it
// kept after a restart: raft-wal v0.4.0 marks the truncated segment sealed
// without an index block, and then could not read it again.
func TestWALKeepsEntriesBeforeATruncatedSuffixAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	ls := openTestLogStore(t, dir)
	appendLogs(t, ls, 1, 10, 1)
	if err := ls.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := ls.GetLog(8, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog(8) above the truncated tail: err = %v, want ErrLogNotFound", err)
	}
	appendLogs(t, ls, 6, 8, 2)
	if err := ls.Close(); err != nil {
		t.Fatal(err)
	}

	ls = openTestLogStore(t, dir)
	defer ls.Close()
	if last, _ := ls.LastIndex(); last != 8 {
		t.Fatalf("LastIndex() = %d after reopen, want 8", last)
	}
	for i := uint64(1); i <= 8; i++ {
		wantTerm := uint64(1)
		if i >= 6 {
			wantTerm = 2
		}
		if err := ls.GetLog(i, &l); err != nil || l.Term != wantTerm || l.Data[0] != byte(i) {
			t.Fatalf("GetLog(%d) after reopen = term %d data %v, err %v; want term %d", i, l.Term, l.Data, err, wantTerm)
		}
	}
	if err := ls.GetLog(9, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog(9) after reopen: err = %v, want ErrLogNotFound", err)
	}
}

// Every file of the WAL is private to its owner, as the rest of the data
// dir is: segments hold sealed credentials and key hashes.
func TestWALFilesArePrivate(t *testing.T) {
	dir := t.TempDir()
	ls := openTestLogStore(t, dir)
	appendLogs(t, ls, 1, 10, 1)
	if err := ls.DeleteRange(6, 10); err != nil { // a tail truncation makes a new segment
		t.Fatal(err)
	}
	if err := ls.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, walDirName, "*"))
	if len(files) < 3 {
		t.Fatalf("want two segments and the metadata file, have %v", files)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if perm := st.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %v: readable beyond its owner", filepath.Base(f), perm)
		}
	}
}

// Garbage after the last committed append of the last segment (a record
// torn by a crash) is dropped when the WAL opens: it opens, keeps every
// committed entry, and appends after them.
func TestWALDropsATornTailOnOpen(t *testing.T) {
	dir := t.TempDir()
	ls := openTestLogStore(t, dir)
	appendLogs(t, ls, 1, 10, 1)
	if err := ls.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, walDirName, "*.wal"))
	seg := segs[len(segs)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	// An entry frame header (type 1, length 16) whose payload never landed.
	torn := []byte{1, 0, 0, 0, 16, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef}
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn, int64((end+7)/8*8)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	ls = openTestLogStore(t, dir)
	defer ls.Close()
	if last, _ := ls.LastIndex(); last != 10 {
		t.Fatalf("LastIndex() = %d after a torn tail, want 10", last)
	}
	appendLogs(t, ls, 11, 12, 1)
	var l raft.Log
	for _, i := range []uint64{1, 10, 12} {
		if err := ls.GetLog(i, &l); err != nil || l.Data[0] != byte(i) {
			t.Fatalf("GetLog(%d) = %v, %v", i, l.Data, err)
		}
	}
}
