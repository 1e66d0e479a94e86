package node

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dropCodePages unmaps from this process the pages of its own executable
// that are mapped read-only (code, read-only data, the function tables)
// and returns how many bytes of mappings it advised. The kernel keeps them
// in its page cache; the ones still used fault back in at their next use.
//
// Code that ran only while the node started (package initialisers,
// opening the stores, Raft's bootstrap) otherwise stays mapped for the
// life of the process, and fault-around maps 64 KiB of the file around
// every page touched: most of the read-only segments end up counted in the
// node's RSS. Dropping them once, when the node is ready, leaves mapped
// only what serving touches. Only mappings holding nothing but the file's
// own pages are dropped (cleanMappings): never .data, which is written, nor
// a mapping of a binary replaced on disk since it started ("(deleted)").
func dropCodePages() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	total := 0
	for _, m := range cleanMappings(smaps, exe) {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, m[0], m[1]-m[0], syscall.MADV_DONTNEED); e != 0 {
			return total, e
		}
		total += int(m[1] - m[0])
	}
	return total, nil
}

// cleanMappings lists the private, read-only mappings of the file exe in
// smaps that hold no page of their own (anonymous: copied on write; a
// page cache page may be dirty while a new binary is written back, so
// dirtiness says nothing here). A cgo binary's relocated read-only data (RELRO), or
// code a debugger patched, is such a copy: dropping it would bring back the
// file's bytes, so a mapping holding any is left alone.
func cleanMappings(smaps []byte, exe string) [][2]uintptr {
	var out [][2]uintptr
	var cur [2]uintptr
	in, clean := false, false
	flush := func() {
		if in && clean {
			out = append(out, cur)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		l := sc.Text()
		if lo, hi, ok := readOnlyMapping(l, exe); ok {
			flush()
			cur, in, clean = [2]uintptr{lo, hi}, true, true
			continue
		}
		f := strings.Fields(l)
		if len(f) >= 5 && !strings.HasSuffix(f[0], ":") { // another mapping
			flush()
			in = false
			continue
		}
		if len(f) >= 2 && f[0] == "Anonymous:" && f[1] != "0" {
			clean = false
		}
	}
	flush()
	return out
}

// readOnlyMapping parses the first line of a mapping in /proc/self/smaps
// and reports the range of a private, non-writable mapping of the file exe.
func readOnlyMapping(line, exe string) (lo, hi uintptr, ok bool) {
	f := strings.Fields(line)
	if len(f) < 6 || strings.Join(f[5:], " ") != exe || len(f[1]) < 4 || f[1][1] != '-' || f[1][3] != 'p' {
		return 0, 0, false
	}
	a, b, _ := strings.Cut(f[0], "-")
	l, err1 := strconv.ParseUint(a, 16, 64)
	h, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil || h <= l {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}
