// Package house checks the shape of the repository that the design asks
// for and that no compiler checks: the report's data is a leaf, the output
// formats and the offline parts build on any system, cmd stays wiring, and
// functions stay short enough to read.
package house

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// longOK are the functions allowed over maxFuncLines: table-driven parsers
// that read better as one switch over the format's cases.
var longOK = map[string]string{
	"unwind/expr.go:evalExpr":           "the DWARF expression machine: one case per DW_OP_ opcode",
	"unwind/cfi.go:execute":             "the call frame instructions: one case per DW_CFA_ opcode",
	"unwind/cfi.go:parseSection":        "a frame section's entries: CIE or FDE, 32- or 64-bit, .eh_frame or .debug_frame",
	"unwind/cfi.go:parseCIE":            "a CIE's fields and augmentation string, in the order the format gives them",
	"symtab/linefiles.go:lineFileNames": "the line table header of DWARF 2 to 5: one case per entry format",
	"symtab/dwarf.go:decode":            "one unit's DIE tree: one case per tag the symbolizer reads",
	"symtab/symbols.go:collectSymsOf":   "ELF32 and ELF64 symbol entries, read in place from the section's bytes",
}

const (
	maxFuncLines = 100
	// maxCmdLines bounds cmd's non-test code, counted raw as wc -l counts
	// it (comments and blank lines included): cmd is wiring (flags ->
	// options -> calls into packages -> output); an engine that grows
	// there belongs in a package (live, offline, cli, ...).
	maxCmdLines = 800
)

func TestFunctionLength(t *testing.T) {
	root := testutil.Root()
	fset := token.NewFileSet()
	walkGo(t, root, func(rel string) {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if ast.IsGenerated(f) {
			return
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			key := rel + ":" + fd.Name.Name
			if _, ok := longOK[key]; n > maxFuncLines && !ok {
				t.Errorf("%s is %d lines (most %d): split it, or list it in longOK with the reason", key, n, maxFuncLines)
			}
		}
	})
}

func TestCmdIsWiring(t *testing.T) {
	root := testutil.Root()
	total := 0
	walkGo(t, filepath.Join(root, "cmd"), func(rel string) {
		b, err := os.ReadFile(filepath.Join(root, "cmd", rel))
		if err != nil {
			t.Fatal(err)
		}
		total += strings.Count(string(b), "\n") // raw lines, as wc -l counts them
	})
	if total >= maxCmdLines {
		t.Errorf("cmd holds %d lines of non-test code (fewer than %d wanted, comments and blank lines included): move engines into packages", total, maxCmdLines)
	}
}

// TestReportIsALeaf: the report's data imports nothing of the project, and
// the output formats import only it (and leaves of their own: pprofpb
// and otlppb write the pprof and OTLP formats, with pbwire's protobuf
// encodings, and import nothing else of the project).
func TestReportIsALeaf(t *testing.T) {
	for pkg, allowed := range map[string][]string{
		"./report":           {"stackshot/report"},
		"./output":           {"stackshot/report", "stackshot/output", "stackshot/internal/term", "stackshot/internal/contain", "stackshot/internal/pprofpb", "stackshot/internal/otlppb", "stackshot/internal/pbwire"},
		"./internal/otlppb":  {"stackshot/internal/otlppb", "stackshot/internal/pbwire"},
		"./internal/pprofpb": {"stackshot/internal/pprofpb", "stackshot/internal/pbwire"},
	} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = testutil.Root()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if !strings.HasPrefix(dep, "stackshot/") {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || dep == a
			}
			if !ok {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// TestOfflinePartsBuildAnywhere: the data, the formats and what reports
// and symbolizes saved captures build for another system.
func TestOfflinePartsBuildAnywhere(t *testing.T) {
	pkgs := []string{"./report", "./output", "./unwind", "./symtab", "./resolve", "./capfile", "./offline"}
	cmd := exec.Command("go", append([]string{"build", "-o", os.DevNull}, pkgs...)...)
	cmd.Dir = testutil.Root()
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("GOOS=darwin go build %v: %v\n%s", pkgs, err, out)
	}
}

// walkGo calls fn with the path (relative to dir) of every non-test Go
// file under dir, testdata excluded.
func walkGo(t *testing.T, dir string, fn func(rel string)) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			rel, _ := filepath.Rel(dir, p)
			fn(rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
