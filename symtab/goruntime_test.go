package symtab

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoRuntimeVars: runtime.allgs and runtime.allglen of goprog, found in
// stripped copies from the code of runtime.allgadd (Go 1.26 built plain
// and as a PIE linked externally; Go 1.27 and Go 1.19, Debian's, when
// installed, as PIEs),
// are nm's addresses in the unstripped build; in a running stripped PIE,
// the slice's length and allglen read from memory agree.
func TestGoRuntimeVars(t *testing.T) {
	skipWithout(t, "go", "gcc", "nm", "strip", "objcopy")
	variants := []struct{ name, build string }{
		{"plain", `go build -o $OUT .`},
		{"pie-external", `CGO_ENABLED=1 go build -trimpath -buildmode=pie -ldflags=-linkmode=external -o $OUT .`},
	}
	variants = append(variants, struct{ name, build string }{"go1.27-pie-external",
		`GOTOOLCHAIN=go1.27.3 CGO_ENABLED=1 go build -trimpath -buildmode=pie -ldflags=-linkmode=external -o $OUT .`})
	const go119 = "/usr/lib/go-1.19/bin"
	if _, err := os.Stat(filepath.Join(go119, "go")); err == nil {
		variants = append(variants, struct{ name, build string }{"go1.19-pie-external",
			`PATH=` + go119 + `:$PATH GO111MODULE=off GOFLAGS= CGO_ENABLED=1 go build -trimpath -buildmode=pie -ldflags=-linkmode=external -o $OUT .`})
	} else {
		t.Logf("Go 1.19 (Debian's golang-1.19-go) is not installed: its build is not checked")
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ref := artifact(t, "goruntime-"+v.name, sh(`cd $SRC/goprog && `+v.build))
			stripped := artifact(t, "goruntime-"+v.name+"-stripped",
				sh(`objcopy --rename-section .gopclntab=.data.rel.ro.pcln `+ref+` $OUT && strip --strip-all $OUT`))
			syms := runNM(t, ref, false)
			want := GoRuntimeVars{Allgs: nmFind(t, syms, "runtime.allgs").addr, Allglen: nmFind(t, syms, "runtime.allglen").addr}
			for _, c := range []struct{ bin, source string }{{ref, "symtab"}, {stripped, "code"}} {
				got, ok := openFileModule(t, New(Options{}), c.bin).GoRuntimeVars()
				want.Source = c.source
				if !ok || got != want {
					t.Errorf("%s: %+v %v, want %+v", filepath.Base(c.bin), got, ok, want)
				}
			}
			if !strings.Contains(v.name, "pie") {
				return
			}
			pid, line := startTarget(t, stripped, "spin")
			if !strings.HasPrefix(line, "ready") {
				t.Fatalf("target printed %q", line)
			}
			var base uint64
			for _, mp := range readProcMaps(t, pid) {
				if mp.off == 0 && strings.HasSuffix(mp.path, filepath.Base(stripped)) {
					base = mp.start
					break
				}
			}
			mem := procMem(t, pid)
			var b [16]byte
			if _, err := mem.ReadAt(b[:8], int64(base+want.Allglen)); err != nil {
				t.Fatal(err)
			}
			if _, err := mem.ReadAt(b[8:], int64(base+want.Allgs+8)); err != nil {
				t.Fatal(err)
			}
			allglen, n := binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
			if allglen != n || n < 4 || n > 1000 {
				t.Errorf("running: allglen %d, len(allgs) %d", allglen, n)
			}
		})
	}
}
