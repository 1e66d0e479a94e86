package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate/tollgate/e2e/ports"
)

// attribute runs v once more and prints where its resident pages are: by
// mapping, the executable's by section, package and module and, with
// prof, the Go runtime's memory accounts from a second run.
func (s *setup) attribute(v *variant, sym, prof string) error {
	if sym == "" {
		return fmt.Errorf("-attr needs -sym, an unstripped build with the same layout")
	}
	lay, err := readLayout(sym)
	if err != nil {
		return err
	}
	exe, err := filepath.EvalSymlinks(v.bin)
	if err != nil {
		return err
	}
	mb, err := s.measure(v, func(n *node) error { return printPages(n.pid(), exe, lay) })
	if err != nil {
		return err
	}
	fmt.Printf("\nVmRSS %.1f MiB (load %s)\n", mb, loadavg())
	if prof == "" {
		return nil
	}
	addr, err := ports.Addr()
	if err != nil {
		return err
	}
	pv := *v
	pv.extra = append(append([]string{}, v.extra...), "--pprof-addr", addr)
	mb, err = s.measure(&pv, func(n *node) error { return printRuntime("http://"+addr, prof) })
	if err != nil {
		return err
	}
	fmt.Printf("\nVmRSS with --pprof-addr %.1f MiB\n", mb)
	return nil
}

// printPages prints the resident memory by mapping class, then the
// executable's resident pages by section, package and module.
func printPages(pid int, exe string, lay *binaryLayout) error {
	ms, err := readSmaps(pid)
	if err != nil {
		return err
	}
	classes := map[string]float64{}
	var exePages []uint64
	anonInExe := 0
	for i, m := range ms {
		c := classify(m, exe, i > 0 && ms[i-1].path == exe && ms[i-1].end == m.start)
		classes[c+" (file)"] += float64(m.rssKB-m.anonKB) * 1024
		classes[c+" (anon)"] += float64(m.anonKB) * 1024
		if m.path != exe {
			continue
		}
		pages, file, err := residentPages(pid, m.start, m.end)
		if err != nil {
			return err
		}
		for j, p := range pages {
			if file[j] {
				exePages = append(exePages, p)
			} else {
				anonInExe++
			}
		}
	}
	for k, v := range classes {
		if v == 0 {
			delete(classes, k)
		}
	}
	fmt.Println("\n## Resident memory by mapping (KiB)\n\n| mapping | KiB |\n|---|---|")
	fmt.Println(strings.Join(top(classes, 20), "\n"))
	bySec, byPkg, byMod := map[string]float64{}, map[string]float64{}, map[string]float64{}
	lay.attribute(exePages, func(sec, _ string) string { return sec }, bySec)
	lay.attribute(exePages, func(sec, name string) string { return sec + " " + pkgOf(name) }, byPkg)
	lay.attribute(exePages, func(sec, name string) string { return sec + " " + moduleOf(pkgOf(name)) }, byMod)
	fmt.Printf("\n## Executable pages resident, file-backed: %d (%.1f MiB); written (anonymous) copies: %d\n", len(exePages), float64(len(exePages))*pageSize/(1<<20), anonInExe)
	fmt.Println("\n### By section (KiB)\n\n| section | KiB |\n|---|---|")
	fmt.Println(strings.Join(top(bySec, 20), "\n"))
	fmt.Println("\n### By section and module (KiB)\n\n| section module | KiB |\n|---|---|")
	fmt.Println(strings.Join(top(byMod, 40), "\n"))
	fmt.Println("\n### By section and package (KiB)\n\n| section package | KiB |\n|---|---|")
	fmt.Println(strings.Join(top(byPkg, 60), "\n"))
	return nil
}

// classify names a mapping: the executable's segments, the anonymous
// memory (the Go heap's arenas sit at random addresses in Go 1.26), files.
func classify(m mapping, exe string, afterExe bool) string {
	switch {
	case m.path == exe:
		return "executable " + m.perms
	case afterExe && m.path == "":
		return "executable .bss/.noptrbss"
	case m.path == "":
		return "anonymous (Go heap, stacks, runtime metadata)"
	}
	return m.path
}

// printRuntime prints the Go runtime's memory accounts (MemStats, as the
// heap profile's debug page gives them) and the goroutine count, and saves
// the heap profile to prof.
func printRuntime(base, prof string) error {
	b, err := fetch(base + "/debug/pprof/heap?debug=1")
	if err != nil {
		return err
	}
	fmt.Println("\n## Go runtime accounts (MemStats, bytes)\n\n| account | KiB |\n|---|---|")
	for _, l := range strings.Split(string(b), "\n") {
		var name string
		var v uint64
		if _, err := fmt.Sscanf(l, "# %s = %d", &name, &v); err == nil && strings.HasSuffix(name, "Sys") || strings.HasPrefix(name, "Heap") || strings.HasPrefix(name, "Stack") {
			if name != "" {
				fmt.Printf("| %s | %d |\n", name, v/1024)
			}
		}
	}
	g, err := fetch(base + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(string(g), "\n")
	fmt.Printf("\n%s\n", first)
	h, err := fetch(base + "/debug/pprof/heap")
	if err != nil {
		return err
	}
	return os.WriteFile(prof, h, 0o644)
}
