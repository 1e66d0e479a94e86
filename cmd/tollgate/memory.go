package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryFlags are the Go runtime's memory settings, as flags: the GC's
// pace (GOGC) and a soft limit on the memory it manages (GOMEMLIMIT). A
// limit makes the GC work harder instead of letting the heap outgrow it,
// so a burst of load cannot take the node past its container's memory.
type memoryFlags struct {
	gcPercent, limit string
}

// cgroupMemoryMax is where cgroup v2 states the container's memory limit
// (a variable for tests).
var cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// autoLimitShare is the share of the cgroup's limit that "auto" sets: the
// rest is for memory outside the Go heap (stacks, the binary, page tables).
const autoLimitShare = 0.9

func (m *memoryFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&m.gcPercent, "gc-percent", envOr("TOLLGATE_GC_PERCENT", envOr("GOGC", "100")),
		"heap growth between garbage collections, in percent of the live heap (Go's GOGC); off: collect only at --memory-limit [TOLLGATE_GC_PERCENT, else GOGC]")
	fs.StringVar(&m.limit, "memory-limit", envOr("TOLLGATE_MEMORY_LIMIT", envOr("GOMEMLIMIT", "auto")),
		"soft limit of the memory Go manages (Go's GOMEMLIMIT), e.g. 512MiB or 2GiB; auto: 90% of the container's cgroup limit if it has one, else none; off: none [TOLLGATE_MEMORY_LIMIT, else GOMEMLIMIT]")
}

// settings turns the flags into the runtime's values: the GC percent (-1:
// off) and the limit in bytes (math.MaxInt64: none).
func (m *memoryFlags) settings() (gcPercent int, limit int64, err error) {
	switch v := strings.TrimSpace(m.gcPercent); v {
	case "off":
		gcPercent = -1
	default:
		if gcPercent, err = strconv.Atoi(v); err != nil || gcPercent < 1 {
			return 0, 0, fmt.Errorf("bad --gc-percent %q: want a percentage of at least 1, or off", m.gcPercent)
		}
	}
	switch v := strings.TrimSpace(m.limit); v {
	case "off", "0":
		limit = math.MaxInt64
	case "auto":
		limit = autoLimit(cgroupMemoryMax)
	default:
		if limit, err = parseBytes(v); err != nil || limit < 16<<20 {
			return 0, 0, fmt.Errorf("bad --memory-limit %q: want a size of at least 16MiB such as 512MiB or 2GiB, auto or off", m.limit)
		}
	}
	if gcPercent < 0 && limit == math.MaxInt64 {
		return 0, 0, fmt.Errorf("--gc-percent off needs a --memory-limit, else the heap grows without bound")
	}
	return gcPercent, limit, nil
}

// apply sets the runtime's memory settings.
func (m *memoryFlags) apply() error {
	gc, limit, err := m.settings()
	if err != nil {
		return err
	}
	debug.SetGCPercent(gc)
	debug.SetMemoryLimit(limit)
	return nil
}

// autoLimit is autoLimitShare of the cgroup limit in path, or none
// (math.MaxInt64) when there is no readable limit.
func autoLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return math.MaxInt64
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 { // "max": no limit
		return math.MaxInt64
	}
	return int64(float64(n) * autoLimitShare)
}

// parseBytes reads a size as GOMEMLIMIT writes it: a number of bytes with
// an optional unit B, KiB, MiB, GiB or TiB (and KB, MB, GB, TB as powers of
// 1000).
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || f*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(f * mult), nil
}
