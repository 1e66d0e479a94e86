package node

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// exeReadOnlyRSS is the resident KiB of this process's read-only mappings
// of its own executable, from /proc/self/smaps.
func exeReadOnlyRSS(t *testing.T) int {
	t.Helper()
	exe, b := selfSmaps(t)
	kb, in := 0, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		if _, _, ok := readOnlyMapping(l, exe); ok {
			in = true
		} else if f := strings.Fields(l); len(f) >= 5 && strings.Contains(f[0], "-") {
			in = false
		}
		if v, ok := strings.CutPrefix(l, "Rss:"); in && ok {
			var n int
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(v, "kB")), &n)
			kb += n
		}
	}
	return kb
}

func TestDropCodePagesUnmapsTheExecutablesReadOnlyPages(t *testing.T) {
	before := exeReadOnlyRSS(t)
	advised, err := dropCodePages()
	if err != nil {
		t.Fatal(err)
	}
	after := exeReadOnlyRSS(t)
	if advised == 0 || after >= before {
		t.Fatalf("advised %d bytes; read-only pages of the executable resident: %d KiB before, %d KiB after; want fewer after", advised, before, after)
	}
	t.Logf("read-only executable pages resident: %d KiB -> %d KiB", before, after)
}

// selfSmaps returns this process's executable and /proc/self/smaps.
func selfSmaps(t *testing.T) (exe string, smaps []byte) {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	smaps, err = os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	return exe, smaps
}

// touchReadOnlyPages reads every page of the executable's clean read-only
// mappings through /proc/self/mem, which faults them into this process as
// a burst's code paths do, and returns their KiB.
func touchReadOnlyPages(t *testing.T) (kb int) {
	t.Helper()
	exe, smaps := selfSmaps(t)
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Skipf("no /proc/self/mem: %v", err)
	}
	defer mem.Close()
	page := make([]byte, os.Getpagesize())
	for _, m := range cleanMappings(smaps, exe) {
		for a := m[0]; a < m[1]; a += uintptr(len(page)) {
			if _, err := mem.ReadAt(page, int64(a)); err != nil {
				t.Skipf("read /proc/self/mem: %v", err)
			}
		}
		kb += int(m[1]-m[0]) >> 10
	}
	return kb
}

// After a burst the node holds the executable's pages the burst faulted
// in; the release made once the node is quiet drops them again.
func TestReleaseDropsTheCodePagesABurstFaultedIn(t *testing.T) {
	if _, err := dropCodePages(); err != nil {
		t.Fatal(err)
	}
	touched := touchReadOnlyPages(t)
	before := exeReadOnlyRSS(t)
	n := &Node{log: slog.New(slog.DiscardHandler)}
	r := memReleaser{threshold: 32 << 20, costShare: releaseCostShare}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n.release(&r, &ms, time.Now())
	after := exeReadOnlyRSS(t)
	if before-after < touched/2 {
		t.Fatalf("read-only executable pages resident: %d KiB before the release, %d KiB after; want at least half of the %d KiB touched dropped", before, after, touched)
	}
	t.Logf("read-only executable pages resident: %d KiB -> %d KiB (%d KiB touched)", before, after, touched)
}

func TestReadOnlyMappingTakesOnlyPrivateReadOnlyMappingsOfTheExecutable(t *testing.T) {
	const exe = "/usr/bin/tollgate"
	for _, c := range []struct {
		line string
		want bool
	}{
		{"00400000-0114d000 r-xp 00000000 fd:01 123 /usr/bin/tollgate", true},
		{"0114d000-020cc000 r--p 00d4d000 fd:01 123 /usr/bin/tollgate", true},
		{"020cc000-0216e000 rw-p 01ccc000 fd:01 123 /usr/bin/tollgate", false}, // written data: private copies
		{"7f0000000000-7f0000001000 r--s 00000000 fd:01 124 /usr/bin/tollgate", false},
		{"7f0000000000-7f0000001000 r--p 00000000 fd:01 125 /data/raft/raft.db", false},
		{"c000000000-c000400000 rw-p 00000000 00:00 0", false},
		{"0114d000-00400000 r--p 00000000 fd:01 123 /usr/bin/tollgate", false}, // end before start
		{"zz-0114d000 r--p 00000000 fd:01 123 /usr/bin/tollgate", false},
		{"00400000-0114d000 r-xp 00000000 fd:01 123 /usr/bin/tollgate (deleted)", false},
	} {
		if _, _, got := readOnlyMapping(c.line, exe); got != c.want {
			t.Errorf("readOnlyMapping(%q) = %v, want %v", c.line, got, c.want)
		}
	}
}

func TestNodeDropsTheStartsCodePagesOnceReady(t *testing.T) {
	logs := &syncBuffer{}
	cfg := baseConfig(t, "n1", slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	tn := startNode(t, cfg)
	eventually(t, 30*time.Second, "the node is ready", func() error {
		if !tn.n.Ready() {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	eventually(t, 10*time.Second, "the start's code pages dropped", func() error {
		if n := strings.Count(logs.String(), "dropped the start's code pages"); n != 1 {
			return fmt.Errorf("dropped %d times, want once", n)
		}
		return nil
	})
	if strings.Contains(logs.String(), "dropped the start's code pages bytes_advised=0") {
		t.Fatalf("nothing advised:\n%s", logs.String())
	}
}

// A cgo binary's relocated read-only data (RELRO) is mapped read-only but
// holds the dynamic linker's written copies: dropping it would put the
// file's unrelocated bytes back (a jump to address 0 at the next C call).
func TestCleanMappingsLeaveMappingsHoldingCopiedPages(t *testing.T) {
	smaps := `00400000-0114d000 r-xp 00000000 fd:01 123 /usr/bin/tollgate
Rss:                 100 kB
Private_Dirty:       100 kB
Anonymous:             0 kB
0114d000-020cc000 r--p 00d4d000 fd:01 123 /usr/bin/tollgate
Rss:                  40 kB
Anonymous:             8 kB
020cc000-020d0000 r--p 01ccc000 fd:01 123 /usr/bin/tollgate
Rss:                   4 kB
Anonymous:             0 kB
020d0000-0216e000 rw-p 01cd0000 fd:01 123 /usr/bin/tollgate
Anonymous:             0 kB
c000000000-c000400000 rw-p 00000000 00:00 0
Anonymous:           400 kB
`
	got := cleanMappings([]byte(smaps), "/usr/bin/tollgate")
	want := [][2]uintptr{{0x400000, 0x114d000}, {0x20cc000, 0x20d0000}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cleanMappings = %x, want %x (the r--p mapping with copied pages and the writable one left alone)", got, want)
	}
}
