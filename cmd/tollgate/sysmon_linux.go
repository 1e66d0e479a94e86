package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// sysmonSlack is the timer slack given to the Go runtime's monitor thread
// (sysmon). Whenever a node goes from idle to busy, sysmon polls every
// 20 µs (a nanosleep and two context switches each time) until the node
// is idle again. A node serving one admin write at a time thus woke
// sysmon several times per write (6 per key create by perf at a load
// average of 20, more on a quiet machine): up to a third of a create's
// CPU, none of it visible to pprof, as sysmon has no P. With 1 ms of slack
// the kernel may defer each of those wake-ups by up to 1 ms, and a create
// costs 0.57-0.88x the CPU (e2e/bench/results/2026-12-02-create-2). What
// sysmon does is unchanged, but it may take a P back from a blocking
// system call up to ~2 ms later instead of ~0.1 ms; other Ps still steal
// that P's goroutines meanwhile.
const sysmonSlack = time.Millisecond

// procRoot is where the process's threads are listed (a variable for tests).
var procRoot = "/proc"

// relaxSysmon sets sysmonSlack on the runtime's monitor thread. Setting
// another thread's slack needs CAP_SYS_NICE (root has it): without it the
// error says so and the node runs as before.
func relaxSysmon() error {
	tid, err := sysmonThread(procRoot, os.Getpid())
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(procRoot, strconv.Itoa(tid), "timerslack_ns"), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("runtime monitor thread's timer slack: %w", err)
	}
	_, err = f.WriteString(strconv.FormatInt(sysmonSlack.Nanoseconds(), 10))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("runtime monitor thread's timer slack (needs CAP_SYS_NICE): %w", err)
	}
	return nil
}

// sysmonThread is the id of the first thread the runtime started after the
// main one: runtime.main starts sysmon before any package is initialised,
// so it is the earliest-started thread besides the main one (thread ids
// grow with creation, and break a tie in start time).
func sysmonThread(root string, pid int) (int, error) {
	dir := filepath.Join(root, strconv.Itoa(pid), "task")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list threads: %w", err)
	}
	best, bestStart := 0, uint64(0)
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pid {
			continue
		}
		start, err := threadStart(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue // the thread exited
		}
		if best == 0 || start < bestStart || start == bestStart && tid < best {
			best, bestStart = tid, start
		}
	}
	if best == 0 {
		return 0, errors.New("no runtime monitor thread found")
	}
	return best, nil
}

// threadStart reads a thread's start time (field 22 of its stat, in clock
// ticks since boot).
func threadStart(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the name may hold spaces and parentheses
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name", path)
	}
	f := strings.Fields(s[i+1:]) // from field 3 on
	if len(f) < 20 {
		return 0, fmt.Errorf("%s: %d fields", path, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
