package procmaps

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// moduleFiles parses every non-test Go file of the module (testdata and
// build caches aside).
func moduleFiles(t *testing.T) (map[string]*ast.File, map[string][]byte) {
	t.Helper()
	root := testutil.Root()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	srcs := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files[rel], srcs[rel] = f, src
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, srcs
}

// Every exported function and method of procmaps is used by production
// code (ReadComm, ReadTaskStatus, IsFile and Writable once had no caller).
func TestNoUnusedExports(t *testing.T) {
	files, _ := moduleFiles(t)
	declared := map[string]string{}
	uses := map[string]int{}
	for path, f := range files {
		inPkg := filepath.Dir(path) == "procmaps"
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if inPkg && n.Name.IsExported() && n.Name.Name != "String" {
					declared[n.Name.Name] = path
				}
			case *ast.SelectorExpr:
				uses[n.Sel.Name]++
			case *ast.Ident:
				if inPkg {
					uses[n.Name]++ // calls inside the package; the declaration counts once
				}
			}
			return true
		})
	}
	for name, path := range declared {
		inside := 0
		if f := files[path]; f != nil {
			inside = 1 // the declaration's own identifier
		}
		if uses[name] <= inside {
			t.Errorf("procmaps.%s (%s) has no caller: delete it", name, path)
		}
	}
}

// The process-gone sentinel and the device-number encoding exist once, in
// procmaps; no other package writes its own.
func TestOneCopy(t *testing.T) {
	_, srcs := moduleFiles(t)
	for path, src := range srcs {
		if filepath.Dir(path) == "procmaps" {
			continue
		}
		s := string(src)
		if strings.Contains(s, `errors.New("no such process")`) {
			t.Errorf("%s declares its own no-such-process error: use procmaps.ErrNoProcess", path)
		}
		if strings.Contains(s, "0xfffff000) << 32") {
			t.Errorf("%s encodes device numbers itself: use procmaps.Mapping.Dev", path)
		}
	}
}
