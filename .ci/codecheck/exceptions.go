package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// readExceptions parses the exceptions file: one violation per line in violation.line's
// form; blank lines and lines starting with # are ignored. A path listed twice is an error.
func readExceptions(name string) (map[string]violation, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]violation{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		v, err := parseException(text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if _, dup := out[v.key()]; dup {
			return nil, fmt.Errorf("%s:%d: %q is listed twice", name, n, v.key())
		}
		out[v.key()] = v
	}
	return out, sc.Err()
}

func parseException(text string) (violation, error) {
	f := strings.Fields(text)
	v := violation{path: f[0]}
	var num string
	switch len(f) {
	case 1:
		return v, nil
	case 2:
		num = f[1]
	case 3:
		v.fn, num = f[1], f[2]
	default:
		return v, fmt.Errorf("want 'path', 'path lines' or 'path func lines', got %q", text)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return v, fmt.Errorf("line count %q in %q is not a positive number", num, text)
	}
	v.lines = n
	return v, nil
}

// compare returns one message per problem: a violation that is not listed, a listed one
// that grew past its recorded size, and a listed one that no longer occurs (its line must
// go, so the list only shrinks).
func compare(found []violation, allowed map[string]violation, lim limits) []string {
	var problems []string
	seen := map[string]bool{}
	for _, v := range found {
		seen[v.key()] = true
		ex, ok := allowed[v.key()]
		switch {
		case !ok:
			problems = append(problems, "new violation: "+describe(v, lim)+"; fix it (exceptions.txt may only shrink)")
		case v.lines > ex.lines:
			problems = append(problems, fmt.Sprintf("grew: %s (exceptions.txt allows %d); shrink it back",
				describe(v, lim), ex.lines))
		}
	}
	var gone []string
	for k, ex := range allowed {
		if !seen[k] {
			gone = append(gone, fmt.Sprintf("fixed: %q no longer breaks a rule; delete that line from exceptions.txt", ex.line()))
		}
	}
	sort.Strings(gone)
	return append(problems, gone...)
}

func describe(v violation, lim limits) string {
	switch {
	case v.fn != "":
		return fmt.Sprintf("%s: func %s has %d lines (limit %d)", v.path, v.fn, v.lines, lim.funcLines)
	case v.lines > 0:
		return fmt.Sprintf("%s has %d lines (limit %d)", v.path, v.lines, lim.fileLines)
	case strings.HasSuffix(v.path, "/DESIGN.md"):
		return v.path + " is missing"
	}
	return v.path + " is named after a review; name tests after the behaviour they pin down"
}
