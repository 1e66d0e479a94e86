package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseDuration accepts Go durations ("90m", "1h30m") plus the units "d"
// (24h) and "w" (7d), also mixed: "1w2d", "1d12h". Signs are not allowed.
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("invalid duration %q: use e.g. 90m, 12h, 30d or 2w", s)
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return 0, bad
	}
	var total time.Duration
	for rest := s; rest != ""; {
		i := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 {
			return 0, bad // no number, or a number without unit
		}
		j := strings.IndexFunc(rest[i:], func(r rune) bool { return (r >= '0' && r <= '9') || r == '.' })
		if j < 0 {
			j = len(rest) - i
		}
		num, unit := rest[:i], rest[i:i+j]
		rest = rest[i+j:]

		var part time.Duration
		switch unit {
		case "d", "w":
			n, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, bad
			}
			day := 24 * float64(time.Hour)
			if unit == "w" {
				day *= 7
			}
			f := n * day
			if f >= float64(1<<63-1) {
				return 0, bad
			}
			part = time.Duration(f)
		default:
			d, err := time.ParseDuration(num + unit)
			if err != nil {
				return 0, bad
			}
			part = d
		}
		if total+part < total {
			return 0, bad // overflow
		}
		total += part
	}
	return total, nil
}

// parseLabels turns repeated "k=v" flags into a map. An empty value is kept
// (UpdateKey reads it as "delete this label").
func parseLabels(pairs []string) (map[string]string, error) {
	return parsePairs("--meta", "", pairs, false)
}

// parsePairs turns repeated key=value flags into a map; nil when there are
// none. Keys are trimmed, values too when trimValue; an empty value is
// kept. example, when not empty, is shown in the error for a bad pair.
func parsePairs(flag, example string, pairs []string, trimValue bool) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			if example != "" {
				return nil, usageErrorf("invalid %s %q: use key=value, e.g. %s", flag, p, example)
			}
			return nil, usageErrorf("invalid %s %q: use key=value", flag, p)
		}
		if trimValue {
			v = strings.TrimSpace(v)
		}
		m[k] = v
	}
	return m, nil
}

// cleanList trims entries from a comma-separated flag and drops empty ones.
func cleanList(items []string) []string {
	out := make([]string, 0, len(items))
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
