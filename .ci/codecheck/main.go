// Command codecheck enforces the size and layout rules of the repository (issue 15):
//
//   - every non-generated, non-test Go file has at most 800 lines;
//   - every function in those files (from its func line through its closing brace) has at
//     most 80 lines;
//   - no test file is named after a review (review_test.go, review_*_test.go, *_review_test.go): tests are
//     named after the behaviour they pin down;
//   - the packages listed in designDirs carry a DESIGN.md.
//
// What the tree breaks today is listed in exceptions.txt, which works as a ratchet: a
// violation that is not listed fails, a listed one that grew past its recorded size fails,
// and a listed one that is gone fails too (delete its line), so the list can only shrink.
//
// Run it from the repository root: go run ./.ci/codecheck
// With -list it prints today's violations in the exceptions format instead of checking.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "repository root")
	exceptions := flag.String("exceptions", "", "exceptions file (default: .ci/codecheck/exceptions.txt under -root)")
	list := flag.Bool("list", false, "print the current violations in the exceptions format and exit")
	flag.Parse()
	if *exceptions == "" {
		*exceptions = filepath.Join(*root, ".ci", "codecheck", "exceptions.txt")
	}
	os.Exit(run(*root, *exceptions, *list, defaultLimits, os.Stdout, os.Stderr))
}

// run checks the tree at root and returns the exit code: 0 when it keeps to the rules and
// to the exceptions file, 1 when it does not, 2 when it cannot be checked.
func run(root, exceptionsPath string, list bool, lim limits, stdout, stderr io.Writer) int {
	found, err := scan(root, lim)
	if err != nil {
		fmt.Fprintln(stderr, "codecheck:", err)
		return 2
	}
	if list {
		for _, v := range found {
			fmt.Fprintln(stdout, v.line())
		}
		return 0
	}
	allowed, err := readExceptions(exceptionsPath)
	if err != nil {
		fmt.Fprintln(stderr, "codecheck:", err)
		return 2
	}
	problems := compare(found, allowed, lim)
	for _, p := range problems {
		fmt.Fprintln(stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "codecheck: %d problem(s); limits: files %d lines, functions %d lines (exceptions: %s)\n",
			len(problems), lim.fileLines, lim.funcLines, exceptionsPath)
		return 1
	}
	fmt.Fprintf(stdout, "codecheck: ok (%d listed exception(s) remain)\n", len(allowed))
	return 0
}
