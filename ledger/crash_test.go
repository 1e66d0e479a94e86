package ledger

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

const (
	helperDirEnv  = "TOLLGATE_LEDGER_HELPER_DIR"
	helperBaseEnv = "TOLLGATE_LEDGER_HELPER_BASE"
	crashRecords  = 2000
)

// TestHelperProcess is the child of TestCrashDurability, not a test of its
// own: it appends crashRecords records from 8 goroutines, cutting report 1
// after the first half, prints "done" once the last Append has returned and
// waits to be killed. It never closes the ledger.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashDurability")
	}
	base, err := strconv.ParseInt(os.Getenv(helperBaseEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad base:", err)
		os.Exit(2)
	}
	l, err := Open(Config{Dir: dir, NodeID: "node-1"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	appendRange(t, l, base, 0, crashRecords/2, 8)
	if rep, err := l.NextReport(); err != nil || rep == nil || rep.Seq != 1 {
		fmt.Fprintln(os.Stderr, "cut:", rep, err)
		os.Exit(2)
	}
	appendRange(t, l, base, crashRecords/2, crashRecords, 8)
	fmt.Println("done")
	time.Sleep(time.Minute) // the parent kills us long before
	os.Exit(3)
}

// TestCrashDurability kills -9 a real process right after its last Append
// returned: every record, the pending sums and the cut report must be there.
func TestCrashDurability(t *testing.T) {
	dir := t.TempDir()
	base := testBase()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperBaseEnv+"="+strconv.FormatInt(base, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	done := false
	for !done && lines.Scan() {
		done = lines.Text() == "done"
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !done {
		t.Fatalf("child exited without \"done\": %v\n%s", lines.Err(), stderr.Bytes())
	}

	l := openTest(t, dir, 0)
	recs := queryAll(t, l, Query{})
	if len(recs) != crashRecords {
		t.Fatalf("after kill -9: %d records, want %d", len(recs), crashRecords)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.RequestId] {
			t.Fatalf("record %s twice", r.RequestId)
		}
		seen[r.RequestId] = true
	}
	_, budAll := expected(base, 0, crashRecords)
	equalMsgs(t, "unreported", l.Unreported(), budAll)

	// Report 1 holds exactly the first half; the pending sums, cut as
	// report 2, exactly the second: nothing lost, nothing counted twice.
	roll1, bud1 := expected(base, 0, crashRecords/2)
	rep, err := l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	equalReports(t, rep, &Report{Seq: 1, Rollups: roll1, Budgets: bud1})
	if err := l.AckReport(1); err != nil {
		t.Fatal(err)
	}
	roll2, bud2 := expected(base, crashRecords/2, crashRecords)
	rep, err = l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	equalReports(t, rep, &Report{Seq: 2, Rollups: roll2, Budgets: bud2})
}
