package main

// Tests that keep the user documentation true: docs/configuration.md lists
// exactly the flags the binaries have, and every relative link in README.md
// and docs/*.md leads to a file (and heading) that exists.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

// configDoc is the flag reference the tests hold to the binaries.
const configDoc = "docs/configuration.md"

// goFlagLine matches a flag line of Go's flag.PrintDefaults: "  -name type".
var goFlagLine = regexp.MustCompile(`^  -([a-z0-9][a-z0-9-]*)`)

// envInBrackets matches the variable tollgate's usage names, "[TOLLGATE_X]".
var envInBrackets = regexp.MustCompile(`\[([A-Z][A-Z0-9_]*)\]`)

// helpFlag is one flag as a binary's help describes it.
type helpFlag struct {
	name string
	env  string // the environment variable its usage names, if any
}

// goFlags parses the flags (and the environment variable each names) from
// the help output of a Go flag.FlagSet.
func goFlags(help string) []helpFlag {
	var out []helpFlag
	lines := strings.Split(help, "\n")
	for i, l := range lines {
		m := goFlagLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		f := helpFlag{name: m[1]}
		// The usage is on the next line, indented by a tab.
		if i+1 < len(lines) {
			if e := envInBrackets.FindStringSubmatch(lines[i+1]); e != nil {
				f.env = e[1]
			}
		}
		out = append(out, f)
	}
	return out
}

// docSection is one heading of the configuration page: the command it
// names and the flags its tables list, each with the text of its row.
type docSection struct {
	flags map[string]string // flag name (without dashes) → table row
}

var (
	headingCommand = regexp.MustCompile("^#+ `([^`]+)`")
	longFlagInCell = regexp.MustCompile("`--([a-z0-9][a-z0-9-]*)")
)

// parseConfigDoc reads the configuration page into sections keyed by the
// command each heading names in backquotes ("tollgate", "tollctl key
// create"); the flags are the long names in the first cell of table rows.
func parseConfigDoc(t *testing.T) map[string]*docSection {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, configDoc))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]*docSection{}
	var cur *docSection
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			cur = nil
			if m := headingCommand.FindStringSubmatch(l); m != nil {
				if sections[m[1]] != nil {
					t.Errorf("%s: two sections for %q", configDoc, m[1])
				}
				cur = &docSection{flags: map[string]string{}}
				sections[m[1]] = cur
			}
			continue
		}
		if cur == nil || !strings.HasPrefix(l, "|") {
			continue
		}
		cells := strings.Split(l, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range longFlagInCell.FindAllStringSubmatch(cells[1], -1) {
			cur.flags[m[1]] = l
		}
	}
	return sections
}

// checkSection reports the flags the binary has and the section lacks, and
// those the section lists that the binary does not have.
func checkSection(t *testing.T, sections map[string]*docSection, command string, flags []helpFlag) {
	t.Helper()
	sec := sections[command]
	if sec == nil {
		t.Errorf("%s has no section headed `%s`", configDoc, command)
		return
	}
	have := map[string]bool{}
	for _, f := range flags {
		have[f.name] = true
		row, ok := sec.flags[f.name]
		switch {
		case !ok:
			t.Errorf("%s, section `%s`: flag --%s is not documented", configDoc, command, f.name)
		case f.env != "" && !strings.Contains(row, "`"+f.env+"`"):
			t.Errorf("%s, section `%s`: the row of --%s does not name its variable %s", configDoc, command, f.name, f.env)
		}
	}
	for name := range sec.flags {
		if !have[name] {
			t.Errorf("%s, section `%s`: documents --%s, which `%s --help` does not have", configDoc, command, name, command)
		}
	}
}

func TestConfigurationDocListsEveryTollgateFlag(t *testing.T) {
	sections := parseConfigDoc(t)
	for _, c := range []struct {
		command string
		help    func(*bytes.Buffer) int
	}{
		{"tollgate", func(b *bytes.Buffer) int { return run([]string{"-h"}, b) }},
		{"tollgate tls ca", func(b *bytes.Buffer) int { return runTLS([]string{"ca", "-h"}, b, b) }},
		{"tollgate tls cert", func(b *bytes.Buffer) int { return runTLS([]string{"cert", "-h"}, b, b) }},
	} {
		var out bytes.Buffer
		if code := c.help(&out); code != 0 {
			t.Fatalf("%s -h: exit %d: %s", c.command, code, out.String())
		}
		flags := goFlags(out.String())
		if len(flags) < 3 {
			t.Fatalf("%s -h: found only %d flags in %q", c.command, len(flags), out.String())
		}
		checkSection(t, sections, c.command, flags)
	}
}

// cobraFlagLine matches a flag line of a cobra command's help:
// "  -o, --output string   ..." or "      --addr string   ...".
var cobraFlagLine = regexp.MustCompile(`^\s+(?:-[a-zA-Z], )?--([a-z0-9][a-z0-9-]*)`)

// cobraHelp splits a cobra help text into its own flags, its subcommands
// and the variable each flag's usage names ("(env X)").
func cobraHelp(help string) (flags []helpFlag, subcommands []string) {
	section := ""
	for _, l := range strings.Split(help, "\n") {
		switch {
		case l == "":
			section = ""
			continue
		case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
			section = l
			continue
		}
		switch {
		case section == "Flags:": // not "Global Flags:": those are the root's
			m := cobraFlagLine.FindStringSubmatch(l)
			if m == nil || m[1] == "help" {
				continue
			}
			f := helpFlag{name: m[1]}
			if _, env, ok := strings.Cut(l, "(env "); ok {
				f.env, _, _ = strings.Cut(env, ")")
			}
			flags = append(flags, f)
		case strings.HasSuffix(section, "Commands:"):
			if name := strings.Fields(l); len(name) > 0 && !slices.Contains([]string{"completion", "help"}, name[0]) {
				subcommands = append(subcommands, name[0])
			}
		}
	}
	return flags, subcommands
}

func TestConfigurationDocListsEveryTollctlFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tollctl")
	}
	bin := filepath.Join(t.TempDir(), "tollctl")
	if out, err := exec.Command("go", "build", "-o", bin, "../tollctl").CombinedOutput(); err != nil {
		t.Fatalf("build tollctl: %v\n%s", err, out)
	}
	sections := parseConfigDoc(t)
	documented := map[string]bool{}
	// Walk the command tree from the root; every command, leaves and
	// groups alike, is checked for the flags of its own.
	queue := [][]string{nil}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		out, err := exec.Command(bin, append(slices.Clone(path), "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("tollctl %s --help: %v\n%s", strings.Join(path, " "), err, out)
		}
		flags, subs := cobraHelp(string(out))
		for _, s := range subs {
			queue = append(queue, append(slices.Clone(path), s))
		}
		command := strings.TrimSpace("tollctl " + strings.Join(path, " "))
		documented[command] = true
		if len(flags) == 0 && len(path) > 0 && len(subs) > 0 {
			continue // a group of commands with no flags of its own
		}
		if path == nil && len(flags) < 5 {
			t.Fatalf("tollctl --help: found only %d global flags in %q", len(flags), out)
		}
		checkSection(t, sections, command, flags)
	}
	for name := range sections {
		if strings.HasPrefix(name, "tollctl") && !documented[name] {
			t.Errorf("%s documents `%s`, which tollctl does not have", configDoc, name)
		}
	}
}

// mdLink matches an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// docFiles are the Markdown files whose links are checked: README.md and
// every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, files...)
}

// anchors returns the GitHub anchors of a Markdown file's headings: lower
// case, all but letters, digits, '-' and '_' dropped, spaces as '-', and
// "-1", "-2", … on repeats. Headings inside code blocks do not count.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func TestDocLinksLeadToExistingFilesAndHeadings(t *testing.T) {
	texts := map[string]string{}
	read := func(path string) (string, bool) {
		if s, ok := texts[path]; ok {
			return s, true
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", false
		}
		texts[path] = string(b)
		return string(b), true
	}
	links := 0
	for _, file := range docFiles(t) {
		text, ok := read(file)
		if !ok {
			t.Fatalf("cannot read %s", file)
		}
		fenced := false
		for i, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				where := fmt.Sprintf("%s:%d: link %s", strings.TrimPrefix(file, repoRoot+"/"), i+1, target)
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s: no such file", where)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if dt, ok := read(dest); !ok || !anchors(dt)[anchor] {
					t.Errorf("%s: no heading with anchor #%s", where, anchor)
				}
			}
		}
	}
	if links < 10 {
		t.Errorf("found only %d relative links: is the link pattern still right?", links)
	}
}

// invocation matches a command line of tollgate or tollctl in the docs:
// "tollctl …", "./tollctl …", "go run ./cmd/tollgate …"; the rest of the
// command ends at a comment, a pipe, a redirection or a subshell's end.
var invocation = regexp.MustCompile(`(?:^|[\s;&|(=$])(?:\./|go run \./cmd/)?(tollctl|tollgate)((?:\s+[^\s#|;&)<>]+)*)`)

// docInvocations returns the tollgate and tollctl command lines of a
// Markdown text: each line of a fenced code block (continuation lines
// joined) and each inline code span.
func docInvocations(text string) []string {
	var out []string
	fenced := false
	var cont strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			if s, ok := strings.CutSuffix(l, "\\"); ok {
				cont.WriteString(s + " ")
				continue
			}
			cont.WriteString(l)
			out = append(out, cont.String())
			cont.Reset()
			continue
		}
		spans := strings.Split(l, "`")
		for i := 1; i < len(spans); i += 2 {
			out = append(out, spans[i])
		}
	}
	return out
}

func TestDocExamplesUseOnlyDocumentedFlags(t *testing.T) {
	sections := parseConfigDoc(t)
	checked := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range docInvocations(string(b)) {
			for _, m := range invocation.FindAllStringSubmatch(line, -1) {
				path, args := m[1], strings.Fields(m[2])
				// The longest command the words name, as the reference
				// heads its sections ("tollctl key create").
				for len(args) > 0 && !strings.HasPrefix(args[0], "-") && hasSectionUnder(sections, path+" "+args[0]) {
					path, args = path+" "+args[0], args[1:]
				}
				sec := sections[path]
				if sec == nil {
					continue // a group ("tollctl key --help") or prose
				}
				checked++
				for _, a := range args {
					name, ok := strings.CutPrefix(a, "--")
					if !ok {
						continue
					}
					name, _, _ = strings.Cut(name, "=")
					if name == "help" {
						continue
					}
					_, own := sec.flags[name]
					_, global := sections["tollctl"].flags[name]
					if !own && !(global && strings.HasPrefix(path, "tollctl")) {
						t.Errorf("%s: `%s` uses --%s, which %s does not document for `%s`",
							strings.TrimPrefix(file, repoRoot+"/"), strings.TrimSpace(m[0]), name, configDoc, path)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d command lines: is the pattern still right?", checked)
	}
}

// hasSectionUnder reports whether the reference has a section for command
// or for a subcommand of it.
func hasSectionUnder(sections map[string]*docSection, command string) bool {
	for name := range sections {
		if name == command || strings.HasPrefix(name, command+" ") {
			return true
		}
	}
	return false
}
