// Package layoutgen produces the runtime layout table of package goruntime:
// it builds a tiny probe program with a Go toolchain, reads the offsets of
// the runtime's structures from the probe's DWARF (goruntime.LayoutFromDWARF),
// and the runtime's words for goroutine statuses and wait reasons from the
// toolchain's own runtime sources (gStatusStrings, waitReasonStrings).
package layoutgen

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"stackshot/goruntime"
)

// Toolchain is one Go toolchain: the go command and extra environment
// (GOTOOLCHAIN=go1.27.3 to have the go command fetch and run that release).
type Toolchain struct {
	Go  string
	Env []string
}

const probeSource = `package main

import "fmt"

func main() { fmt.Println("probe") }
`

func (tc Toolchain) cmd(dir string, args ...string) *exec.Cmd {
	c := exec.Command(tc.Go, args...)
	c.Dir = dir
	// (go generate sets GOROOT to its own toolchain's: not another's.)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GOROOT=") {
			c.Env = append(c.Env, e)
		}
	}
	c.Env = append(c.Env, "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	c.Env = append(c.Env, tc.Env...)
	return c
}

// Probe builds the probe with tc in a temporary directory and returns the
// toolchain's exact version and its layout.
func Probe(tc Toolchain) (string, *goruntime.Layout, error) {
	dir, err := os.MkdirTemp("", "layoutprobe")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module probe\n\ngo 1.19\n"), 0o644); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(probeSource), 0o644); err != nil {
		return "", nil, err
	}
	if out, err := tc.cmd(dir, "build", "-o", "probe", ".").CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("building the probe with %s: %v\n%s", tc.Go, err, out)
	}
	root, err := tc.cmd(dir, "env", "GOROOT").Output()
	if err != nil {
		return "", nil, fmt.Errorf("%s env GOROOT: %v", tc.Go, err)
	}
	bin := filepath.Join(dir, "probe")
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", nil, err
	}
	ef, err := elf.Open(bin)
	if err != nil {
		return "", nil, err
	}
	defer ef.Close()
	d, err := ef.DWARF()
	if err != nil {
		return "", nil, err
	}
	l, err := goruntime.LayoutFromDWARF(d)
	if err != nil {
		return "", nil, err
	}
	l.Release = goruntime.Release(bi.GoVersion)
	src := filepath.Join(strings.TrimSpace(string(root)), "src", "runtime")
	if l.Statuses, err = stringTable(src, "gStatusStrings"); err != nil {
		return "", nil, err
	}
	if l.WaitReasons, err = stringTable(src, "waitReasonStrings"); err != nil {
		return "", nil, err
	}
	if l.FuncIDWrapper, err = funcIDWrapper(strings.TrimSpace(string(root))); err != nil {
		return "", nil, err
	}
	return bi.GoVersion, l, nil
}

// funcIDWrapper evaluates the funcID of wrappers: internal/abi's
// FuncID_wrapper (Go 1.20+), else the runtime's funcID_wrapper.
func funcIDWrapper(goroot string) (int, error) {
	for _, c := range []struct{ dir, file, name string }{
		{"src/internal/abi", "symtab.go", "FuncIDWrapper"},
		{"src/internal/abi", "symtab.go", "FuncID_wrapper"},
		{"src/runtime", "symtab.go", "funcID_wrapper"},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(goroot, c.dir, c.file), nil, 0)
		if err != nil {
			continue
		}
		consts := map[string]int{}
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				iotaConsts(gd, consts)
			}
		}
		if v, ok := consts[c.name]; ok {
			return v, nil
		}
	}
	return 0, fmt.Errorf("no FuncID_wrapper in %s", goroot)
}

// stringTable evaluates the runtime's keyed string array `name` (keys are
// iota constants of the runtime package) from its sources.
func stringTable(dir, name string) ([]string, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		n := fi.Name()
		return !strings.HasSuffix(n, "_test.go") && (n == "runtime2.go" || n == "traceback.go")
	}, 0)
	if err != nil {
		return nil, err
	}
	consts := map[string]int{}
	var table *ast.CompositeLit
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				switch gd.Tok {
				case token.CONST:
					iotaConsts(gd, consts)
				case token.VAR:
					for _, s := range gd.Specs {
						vs := s.(*ast.ValueSpec)
						if len(vs.Names) == 1 && vs.Names[0].Name == name && len(vs.Values) == 1 {
							table, _ = vs.Values[0].(*ast.CompositeLit)
						}
					}
				}
			}
		}
	}
	if table == nil {
		return nil, fmt.Errorf("no %s in %s", name, dir)
	}
	var out []string
	for _, e := range table.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return nil, fmt.Errorf("%s: unkeyed element", name)
		}
		id, ok := kv.Key.(*ast.Ident)
		if !ok {
			return nil, fmt.Errorf("%s: key %T", name, kv.Key)
		}
		i, ok := consts[id.Name]
		if !ok {
			return nil, fmt.Errorf("%s: unknown constant %s", name, id.Name)
		}
		lit, ok := kv.Value.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return nil, fmt.Errorf("%s: value of %s is not a string", name, id.Name)
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return nil, err
		}
		for len(out) <= i {
			out = append(out, "")
		}
		out[i] = s
	}
	return out, nil
}

// iotaConsts records the values of a const block's iota constants (a plain
// `X = iota` first, then implicit repetitions, optionally `iota + N`).
func iotaConsts(gd *ast.GenDecl, consts map[string]int) {
	var last ast.Expr
	for i, s := range gd.Specs {
		vs := s.(*ast.ValueSpec)
		if len(vs.Values) > 0 {
			last = vs.Values[0]
		}
		v, ok := iotaValue(last, i)
		if !ok {
			continue
		}
		for _, n := range vs.Names {
			if n.Name != "_" {
				consts[n.Name] = v
			}
		}
	}
}

func iotaValue(e ast.Expr, i int) (int, bool) {
	switch x := e.(type) {
	case *ast.Ident:
		return i, x.Name == "iota"
	case *ast.BinaryExpr:
		id, ok := x.X.(*ast.Ident)
		lit, ok2 := x.Y.(*ast.BasicLit)
		if ok && ok2 && id.Name == "iota" && x.Op == token.ADD {
			n, err := strconv.Atoi(lit.Value)
			return i + n, err == nil
		}
	}
	return 0, false
}

// Render writes the table as the Go source of goruntime/layouts.go.
func Render(ls []*goruntime.Layout) []byte {
	sort.Slice(ls, func(i, j int) bool { return releaseLess(ls[i].Release, ls[j].Release) })
	var b bytes.Buffer
	b.WriteString("// Code generated by goruntime/gen; DO NOT EDIT.\n\npackage goruntime\n\nimport \"sync\"\n\n")
	b.WriteString("// knownLayouts holds the runtime layout of each Go release the generator\n// probed (go generate ./goruntime), built at its first use: only a Go\n// target needs it, and a map built at every start of stackshot cost it\n// 0.02 ms.\n")
	b.WriteString("var knownLayouts = sync.OnceValue(func() map[string]Layout {\nreturn map[string]Layout{\n")
	for _, l := range ls {
		b.WriteString(Entry(l))
	}
	b.WriteString("}\n})\n")
	if src, err := format.Source(b.Bytes()); err == nil {
		return src
	}
	return b.Bytes()
}

// Entry is one release's table entry as Go source.
func Entry(l *goruntime.Layout) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\t%q: {\n\t\tRelease: %q,\n", l.Release, l.Release)
	fmt.Fprintf(&b, "\t\tGStackLo: %d, GStackHi: %d, GSchedSP: %d, GSchedPC: %d, GSchedBP: %d,\n", l.GStackLo, l.GStackHi, l.GSchedSP, l.GSchedPC, l.GSchedBP)
	fmt.Fprintf(&b, "\t\tGSyscallSP: %d, GSyscallPC: %d, GM: %d, GAtomicStatus: %d, GGoid: %d,\n", l.GSyscallSP, l.GSyscallPC, l.GM, l.GAtomicStatus, l.GGoid)
	fmt.Fprintf(&b, "\t\tGWaitSince: %d, GWaitReason: %d, GGoPC: %d, GStartPC: %d, GParentGoid: %d, GSize: %d,\n", l.GWaitSince, l.GWaitReason, l.GGoPC, l.GStartPC, l.GParentGoid, l.GSize)
	fmt.Fprintf(&b, "\t\tMProcID: %d,\n", l.MProcID)
	fmt.Fprintf(&b, "\t\tMDPcHeader: %d, MDFuncnametab: %d, MDPctab: %d, MDPclntable: %d, MDFtab: %d,\n", l.MDPcHeader, l.MDFuncnametab, l.MDPctab, l.MDPclntable, l.MDFtab)
	fmt.Fprintf(&b, "\t\tMDMinPC: %d, MDMaxPC: %d, MDText: %d, MDBss: %d, MDEbss: %d, MDNoptrbss: %d, MDEnoptrbss: %d,\n", l.MDMinPC, l.MDMaxPC, l.MDText, l.MDBss, l.MDEbss, l.MDNoptrbss, l.MDEnoptrbss)
	fmt.Fprintf(&b, "\t\tFuncEntryOff: %d, FuncNameOff: %d, FuncPcsp: %d, FuncFuncID: %d, FuncIDWrapper: %d,\n", l.FuncEntryOff, l.FuncNameOff, l.FuncPcsp, l.FuncFuncID, l.FuncIDWrapper)
	fmt.Fprintf(&b, "\t\tStatuses: %s,\n", strList(l.Statuses))
	fmt.Fprintf(&b, "\t\tWaitReasons: %s,\n", strList(l.WaitReasons))
	b.WriteString("\t},\n")
	return b.String()
}

func strList(v []string) string {
	var b strings.Builder
	b.WriteString("[]string{")
	for i, s := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(s))
	}
	b.WriteString("}")
	return b.String()
}

func releaseLess(a, b string) bool {
	na, _ := strconv.Atoi(strings.TrimPrefix(a, "go1."))
	nb, _ := strconv.Atoi(strings.TrimPrefix(b, "go1."))
	return na < nb
}
