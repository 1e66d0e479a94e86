package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// mapping is one entry of /proc/PID/smaps.
type mapping struct {
	start, end uint64
	perms      string
	offset     uint64
	path       string
	rssKB      uint64
	anonKB     uint64
}

// readSmaps parses /proc/PID/smaps.
func readSmaps(pid int) ([]mapping, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	var ms []mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			m := mapping{perms: f[1]}
			m.start, _ = strconv.ParseUint(lo, 16, 64)
			m.end, _ = strconv.ParseUint(hi, 16, 64)
			m.offset, _ = strconv.ParseUint(f[2], 16, 64)
			if len(f) >= 6 {
				m.path = f[5]
			}
			ms = append(ms, m)
			continue
		}
		if len(ms) == 0 || len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			ms[len(ms)-1].rssKB = v
		case "Anonymous:":
			ms[len(ms)-1].anonKB = v
		}
	}
	return ms, sc.Err()
}

// residentPages lists the pages of [start, end) that are present in the
// process's page tables (/proc/PID/pagemap bit 63), and whether each is
// file-backed (bit 61) rather than anonymous (a written private copy).
func residentPages(pid int, start, end uint64) (pages []uint64, file []bool, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	n := (end - start) / pageSize
	buf := make([]byte, 8*n)
	if _, err := f.ReadAt(buf, int64(start/pageSize*8)); err != nil && err != io.EOF {
		return nil, nil, err
	}
	for i := uint64(0); i < n; i++ {
		e := binary.LittleEndian.Uint64(buf[8*i:])
		if e&(1<<63) != 0 {
			pages = append(pages, start+i*pageSize)
			file = append(file, e&(1<<61) != 0)
		}
	}
	return pages, file, nil
}

const pageSize = 4096

// symbol is one allocated symbol of the unstripped binary.
type symbol struct {
	name       string
	start, end uint64
}

// binaryLayout is the sections and symbols of an unstripped build with the
// same layout as the measured binary.
type binaryLayout struct {
	sections []symbol
	syms     []symbol // sorted by start
}

func readLayout(path string) (*binaryLayout, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l := &binaryLayout{}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Addr != 0 {
			l.sections = append(l.sections, symbol{s.Name, s.Addr, s.Addr + s.Size})
		}
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s has no symbol table (build it without -s -w): %w", path, err)
	}
	for _, s := range syms {
		if s.Value != 0 && s.Size > 0 && s.Section != elf.SHN_UNDEF {
			l.syms = append(l.syms, symbol{s.Name, s.Value, s.Value + s.Size})
		}
	}
	sort.Slice(l.syms, func(i, j int) bool { return l.syms[i].start < l.syms[j].start })
	return l, nil
}

// section names the section holding addr.
func (l *binaryLayout) section(addr uint64) string {
	for _, s := range l.sections {
		if addr >= s.start && addr < s.end {
			return s.name
		}
	}
	return "(between sections)"
}

// attribute adds, for each page, its bytes to the group of every symbol
// that overlaps it (by overlap); bytes no symbol covers go to the section.
func (l *binaryLayout) attribute(pages []uint64, group func(section, name string) string, into map[string]float64) {
	for _, p := range pages {
		sec := l.section(p)
		covered := uint64(0)
		i := sort.Search(len(l.syms), func(i int) bool { return l.syms[i].end > p })
		for ; i < len(l.syms) && l.syms[i].start < p+pageSize; i++ {
			s := l.syms[i]
			ov := min(s.end, p+pageSize) - max(s.start, p)
			covered += ov
			into[group(sec, s.name)] += float64(ov)
		}
		if covered < pageSize {
			into[sec+" (no symbol)"] += float64(pageSize - covered)
		}
	}
}

// pkgOf is the Go package of a symbol name ("type:" and "go:" prefixes and
// method receivers removed).
func pkgOf(name string) string {
	for _, p := range []string{"type:.namedata.", "type:.importpath.", "type:*", "type:", "go:itab.*", "go:itab.", "go:string.", "go:"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			if p == "go:string." || p == "go:" && !strings.Contains(rest, "/") {
				return "go:" + strings.SplitN(rest, ".", 2)[0]
			}
			name = rest
			break
		}
	}
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// moduleOf groups a package by its module root (three path elements for
// hosted paths, the first element for the standard library).
func moduleOf(pkg string) string {
	parts := strings.Split(pkg, "/")
	if strings.Contains(parts[0], ".") && len(parts) >= 3 {
		n := 3
		if len(parts) > 3 && (strings.HasPrefix(parts[3], "v") && len(parts[3]) <= 3) {
			n = 4
		}
		return strings.Join(parts[:n], "/")
	}
	return parts[0]
}

// top formats the n largest groups of m (bytes) as table rows in KiB.
func top(m map[string]float64, n int) []string {
	type kv struct {
		k string
		v float64
	}
	var s []kv
	total := 0.0
	for k, v := range m {
		s = append(s, kv{k, v})
		total += v
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v > s[j].v })
	var out []string
	rest := 0.0
	for i, e := range s {
		if i < n {
			out = append(out, fmt.Sprintf("| %s | %.0f |", e.k, e.v/1024))
		} else {
			rest += e.v
		}
	}
	out = append(out, fmt.Sprintf("| (%d others) | %.0f |", max(0, len(s)-n), rest/1024), fmt.Sprintf("| **total** | **%.0f** |", total/1024))
	return out
}
