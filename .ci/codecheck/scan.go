package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// limits are the rules a tree is checked against.
type limits struct {
	fileLines  int      // most lines in a non-generated, non-test Go file
	funcLines  int      // most lines in one function, func line through closing brace
	designDirs []string // packages (slash paths from the root) that must have a DESIGN.md
}

var defaultLimits = limits{
	fileLines: 800,
	funcLines: 80,
	designDirs: []string{
		"raftstore", "node", "node/proxy", "routing", "routing/translate", "ledger", "ratelimit", "node/console",
	},
}

// violation is one breach of a rule. Its line form is also the exceptions file's:
//
//	path lines        a file that is too long
//	path func lines   a function that is too long (methods as Type.Method)
//	path              a file that must not exist (review_*_test.go) or must (DESIGN.md)
type violation struct {
	path  string // slash path from the root
	fn    string // function name, for a long function
	lines int    // 0 for a file that must (not) exist
}

func (v violation) key() string {
	if v.fn != "" {
		return v.path + " " + v.fn
	}
	return v.path
}

func (v violation) line() string {
	switch {
	case v.fn != "":
		return fmt.Sprintf("%s %s %d", v.path, v.fn, v.lines)
	case v.lines > 0:
		return fmt.Sprintf("%s %d", v.path, v.lines)
	}
	return v.path
}

// reviewTest matches test files named after a review rather than a behaviour.
var reviewTest = regexp.MustCompile(`^(review(_.*)?|.*_review)_test\.go$`)

// scan walks the Go files under root (skipping hidden directories, testdata, vendor,
// node_modules and the generated proto/ tree) and returns every violation, sorted.
func scan(root string, lim limits) ([]violation, error) {
	var out []violation
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".go") {
			return nil
		}
		if strings.HasSuffix(d.Name(), "_test.go") {
			if reviewTest.MatchString(d.Name()) {
				out = append(out, violation{path: rel})
			}
			return nil
		}
		vs, err := checkFile(p, rel, lim)
		out = append(out, vs...)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, dir := range lim.designDirs {
		design := path.Join(dir, "DESIGN.md")
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(design))); errors.Is(err, fs.ErrNotExist) {
			out = append(out, violation{path: design})
		} else if err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out, nil
}

func skipDir(rel, name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
		name == "testdata" || name == "vendor" || name == "node_modules" || rel == "proto"
}

// checkFile measures one non-test Go file and its functions. Generated files are skipped.
func checkFile(p, rel string, lim limits) ([]violation, error) {
	src, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, p, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", rel, err)
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	var out []violation
	if n := countLines(src); n > lim.fileLines {
		out = append(out, violation{path: rel, lines: n})
	}
	longest := map[string]int{} // two init functions share a name: keep the longer
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		if name := funcName(fd); n > lim.funcLines && n > longest[name] {
			longest[name] = n
		}
	}
	for name, n := range longest {
		out = append(out, violation{path: rel, fn: name, lines: n})
	}
	return out, nil
}

// countLines counts lines as wc -l does, plus a last line without a newline.
func countLines(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

// funcName is Name for a function and Type.Name for a method (type parameters dropped).
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		default:
			return fd.Name.Name
		}
	}
}
