package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeThreads writes a /proc-like tree: pid's threads with their start
// times (field 22 of stat), names with spaces and parentheses included.
func fakeThreads(t *testing.T, pid int, starts map[int]uint64) string {
	t.Helper()
	root := t.TempDir()
	for tid, start := range starts {
		dir := filepath.Join(root, strconv.Itoa(pid), "task", strconv.Itoa(tid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fields := make([]string, 20)
		for i := range fields {
			fields[i] = "0"
		}
		fields[19] = strconv.FormatUint(start, 10)
		stat := fmt.Sprintf("%d (tollgate (x) y) S %s\n", tid, strings.Join(fields[1:], " "))
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestSysmonThreadIsTheFirstStartedAfterTheMainThread(t *testing.T) {
	for _, c := range []struct {
		name   string
		starts map[int]uint64
		want   int
	}{
		{"earliest start", map[int]uint64{100: 5, 103: 9, 104: 7, 110: 8}, 104},
		{"a tie goes to the lower id", map[int]uint64{100: 5, 101: 6, 102: 6, 103: 6}, 101},
		{"the main thread never", map[int]uint64{100: 1, 105: 6}, 105},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := sysmonThread(fakeThreads(t, 100, c.starts), 100)
			if err != nil || got != c.want {
				t.Fatalf("sysmonThread = %d, %v; want %d", got, err, c.want)
			}
		})
	}
	if _, err := sysmonThread(fakeThreads(t, 100, map[int]uint64{100: 1}), 100); err == nil {
		t.Fatal("a process with only its main thread: no error")
	}
}

// TestRelaxSysmonSlowsOnlyTheMonitorThread sets the slack for real on this
// test process and checks the thread it chose is the runtime's monitor: a
// thread that sleeps with a timeout (nanosleep, or a futex wait with one),
// which no idle thread that runs goroutines does.
func TestRelaxSysmonSlowsOnlyTheMonitorThread(t *testing.T) {
	tid, err := sysmonThread(procRoot, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	before := readSlack(t, os.Getpid())
	if err := relaxSysmon(); errors.Is(err, os.ErrPermission) {
		t.Skipf("no CAP_SYS_NICE: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if got := readSlack(t, tid); got != sysmonSlack.Nanoseconds() {
		t.Fatalf("monitor thread %d slack %d ns, want %d", tid, got, sysmonSlack.Nanoseconds())
	}
	if got := readSlack(t, os.Getpid()); got != before {
		t.Fatalf("main thread slack %d ns, was %d", got, before)
	}
	// The monitor is mostly asleep; look a bounded number of times.
	var b []byte
	for range 100 {
		if b, err = os.ReadFile(filepath.Join(procRoot, strconv.Itoa(os.Getpid()), "task", strconv.Itoa(tid), "syscall")); err != nil {
			t.Skipf("cannot read the thread's system call: %v", err)
		}
		if timedSleep(string(b)) {
			return
		}
	}
	t.Fatalf("thread %d is in %q: not the monitor's timed sleep", tid, b)
}

// timedSleep reports whether a /proc/TID/syscall line is a sleep with a
// timeout: nanosleep, clock_nanosleep, or a futex wait given a timeout.
func timedSleep(line string) bool {
	f := strings.Fields(line)
	return len(f) > 4 && (f[0] == "35" || f[0] == "230" || f[0] == "202" && f[4] != "0x0")
}

func readSlack(t *testing.T, tid int) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(tid), "timerslack_ns"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
