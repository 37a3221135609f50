package symtab

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// noSectionHeaders writes a copy of bin without section headers (as
// sstrip leaves binaries): only the segments remain to find Go's tables in.
func noSectionHeaders(t *testing.T, bin, out string) string {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	le.PutUint64(b[0x28:], 0) // e_shoff
	le.PutUint16(b[0x3c:], 0) // e_shnum
	le.PutUint16(b[0x3e:], 0) // e_shstrndx
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// goVersionOf is the Go version the go command builds with.
func goVersionOf(t *testing.T) string {
	t.Helper()
	v, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}

// TestGoPclntabDiscovery: goprog built plain, as a PIE linked externally
// (Debian's recipe) and statically; each stripped of its symbols with its
// .gopclntab section renamed (so the table is found by its header alone),
// and again without any section headers. Every main.* and runtime.*
// function of the unstripped build is named the same, at the same line,
// the Go version and runtime.firstmoduledata are found, and the frame
// sizes agree with Go's own CFI (.debug_frame) at every row.
func TestGoPclntabDiscovery(t *testing.T) {
	skipWithout(t, "go", "gcc", "nm", "objcopy", "strip", "readelf")
	version := goVersionOf(t)
	for _, v := range []struct{ name, build string }{
		{"plain", `go build -o $OUT .`},
		{"pie-external", `go build -trimpath -buildmode=pie -ldflags=-linkmode=external -o $OUT .`},
		{"static-external", `go build -ldflags="-linkmode=external -extldflags=-static" -o $OUT .`},
	} {
		t.Run(v.name, func(t *testing.T) {
			ref := artifact(t, "gofind-"+v.name, sh(`cd $SRC/goprog && CGO_ENABLED=1 `+v.build))
			stripped := artifact(t, "gofind-"+v.name+"-stripped",
				sh(`objcopy --rename-section .gopclntab=.data.rel.ro.pcln `+ref+` $OUT && strip --strip-all $OUT`))
			bare := noSectionHeaders(t, stripped, stripped+"-bare")
			syms := runNM(t, ref, false)
			s := New(Options{})
			refMod := openFileModule(t, s, ref)
			rs := refMod.GoSymbols("runtime.allgs", "runtime.allglen", "runtime.nosuchthing")
			if rs["runtime.allgs"] != nmFind(t, syms, "runtime.allgs").addr || rs["runtime.allglen"] != nmFind(t, syms, "runtime.allglen").addr || len(rs) != 2 {
				t.Errorf("GoSymbols: %v", rs)
			}
			for _, bin := range []string{stripped, bare} {
				// (A symbolizer of its own: the copies share the build id
				// of the reference, which a shared one would open instead.)
				m := openFileModule(t, New(Options{}), bin)
				info, ok := m.GoInfo()
				if !ok {
					t.Fatalf("%s: no Go pclntab found", filepath.Base(bin))
				}
				if info.Version != version {
					t.Errorf("%s: Go version %q, want %q", filepath.Base(bin), info.Version, version)
				}
				md := nmFind(t, syms, "runtime.firstmoduledata")
				text := nmFind(t, syms, "runtime.text")
				if info.Moduledata != md.addr || info.Text != text.addr || info.Etext <= info.Text {
					t.Errorf("%s: moduledata %#x text %#x..%#x, want %#x text %#x", filepath.Base(bin), info.Moduledata, info.Text, info.Etext, md.addr, text.addr)
				}
				named := 0
				for _, sym := range syms {
					if sym.typ != 'T' && sym.typ != 't' || !strings.HasPrefix(sym.name, "main.") && !strings.HasPrefix(sym.name, "runtime.") ||
						sym.name == "runtime.text" || sym.name == "runtime.etext" { // markers, not functions
						continue
					}
					got, want := m.Lookup(sym.addr, nil), refMod.Lookup(sym.addr, nil)
					if len(want) == 0 || want[len(want)-1].Line == 0 {
						continue // markers (runtime.etext) and ABI wrappers: no DWARF to compare with
					}
					if len(got) == 0 {
						t.Errorf("%s: %s at %#x: %v, reference %v", filepath.Base(bin), sym.name, sym.addr, got, want)
						continue
					}
					g, w := got[len(got)-1], want[len(want)-1]
					name := strings.TrimSuffix(sym.name, ".abi0")
					if strings.TrimSuffix(w.Function, ".abi0") != name {
						continue
					}
					if g.Function != name || g.Offset != 0 || g.Line != w.Line || filepath.Base(g.File) != filepath.Base(w.File) {
						t.Errorf("%s: %#x is %s %s:%d, want %s %s:%d", filepath.Base(bin), sym.addr, g.Function, g.File, g.Line, sym.name, w.File, w.Line)
					}
					named++
				}
				if named < 100 {
					t.Errorf("%s: only %d functions checked", filepath.Base(bin), named)
				}
				if entry, end, ok := m.GoFunc("main.leafWork"); !ok || entry != nmFind(t, syms, "main.leafWork").addr || end <= entry {
					t.Errorf("%s: GoFunc(main.leafWork) = %#x, %#x, %v", filepath.Base(bin), entry, end, ok)
				}
				checkFrameSizes(t, m.GoFrames(), ref)
				if got := m.GoSymbols("runtime.allgs"); len(got) != 0 {
					t.Errorf("%s: symbols of a stripped binary: %v", filepath.Base(bin), got)
				}
			}
		})
	}
}

// checkFrameSizes compares GoFrames with Go's .debug_frame in ref, as
// readelf interprets it: at every row whose CFA is rsp+N in Go code, the
// frame size is N-8.
func checkFrameSizes(t *testing.T, g *GoFrames, ref string) {
	t.Helper()
	if g == nil {
		t.Fatalf("no Go frame sizes")
	}
	out, err := exec.Command("readelf", "--debug-dump=frames-interp", ref).Output()
	if err != nil {
		t.Fatalf("readelf: %v", err)
	}
	checked, bad := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || len(f[0]) != 16 || !strings.HasPrefix(f[1], "rsp+") {
			continue
		}
		addr, err1 := strconv.ParseUint(f[0], 16, 64)
		n, err2 := strconv.ParseUint(f[1][4:], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		_, size, _, _, ok := g.FrameSize(addr)
		if !ok {
			continue // C code of the cgo runtime
		}
		checked++
		if size+8 != n {
			if bad++; bad <= 10 {
				t.Errorf("frame size at %#x: %d, .debug_frame says CFA rsp+%d", addr, size, n)
			}
		}
	}
	if checked < 1000 {
		t.Errorf("only %d CFI rows compared", checked)
	}
}

// TestGoPclntabBadInput: a stripped Go binary whose pclntab header is
// corrupted, and a C binary carrying a pclntab magic and Go's build info
// magic in its data, both without section headers: no table is accepted,
// nothing panics, and no Go name is made up.
func TestGoPclntabBadInput(t *testing.T) {
	skipWithout(t, "go", "gcc", "objcopy", "strip", "nm")
	ref := artifact(t, "gofind-bad-ref", sh(`cd $SRC/goprog && go build -o $OUT .`))
	stripped := artifact(t, "gofind-bad-stripped",
		sh(`objcopy --rename-section .gopclntab=.data.rel.ro.pcln `+ref+` $OUT && strip --strip-all $OUT`))
	leaf := nmFind(t, runNM(t, ref, false), "main.leafWork").addr
	ef, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	sec := ef.Section(".data.rel.ro.pcln")
	ef.Close()
	if sec == nil {
		t.Fatal("no renamed pclntab section")
	}
	b, err := os.ReadFile(stripped)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	for _, c := range []struct {
		name    string
		corrupt func(h []byte)
	}{
		{"intact", nil}, // the control: found and named
		{"pcln-offset-beyond", func(h []byte) { le.PutUint64(h[8+7*8:], 1<<40) }},
		{"offsets-out-of-order", func(h []byte) { le.PutUint64(h[8+3*8:], le.Uint64(h[8+6*8:])+8) }},
		{"functab-unsorted", func(h []byte) {
			ft := h[le.Uint64(h[8+7*8:]):]
			le.PutUint32(ft[8*8:], le.Uint32(ft[2*8:])-1)
		}},
		{"quantum", func(h []byte) { h[6] = 3 }},
		{"nfunc-huge", func(h []byte) { le.PutUint64(h[8:], 1<<50) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := append([]byte(nil), b...)
			if c.corrupt != nil {
				c.corrupt(bad[sec.Offset:])
			}
			p := filepath.Join(t.TempDir(), "gofind-bad-"+c.name)
			if err := os.WriteFile(p, bad, 0o755); err != nil {
				t.Fatal(err)
			}
			p = noSectionHeaders(t, p, p+"-bare")
			m := openFileModule(t, New(Options{}), p)
			if c.corrupt == nil {
				if _, ok := m.GoInfo(); !ok || m.GoFrames() == nil || lookupName(m, leaf) != "main.leafWork" {
					t.Fatalf("the intact binary: Go info %v, frames %v, %#x named %q", ok, m.GoFrames() != nil, leaf, lookupName(m, leaf))
				}
				return
			}
			if info, ok := m.GoInfo(); ok {
				t.Errorf("a corrupted pclntab was accepted: %+v", info)
			}
			if g := m.GoFrames(); g != nil {
				t.Errorf("frame sizes from a corrupted pclntab")
			}
			for _, s := range m.Lookup(leaf, nil) {
				if strings.HasPrefix(s.Function, "main.") || strings.HasPrefix(s.Function, "runtime.") {
					t.Errorf("name %q made up at %#x", s.Function, leaf)
				}
			}
		})
	}
	t.Run("c-with-magics", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "magics.c")
		// A Go 1.20 pclntab header (nfunc 2, nfiles 1, offsets in order)
		// whose function table is not sorted, and the build info magic.
		code := `#include <stdio.h>
__attribute__((used, aligned(16))) static const unsigned char fake[] = {
 0xf1,0xff,0xff,0xff,0,0,1,8, 2,0,0,0,0,0,0,0, 1,0,0,0,0,0,0,0, 0,0x10,0x40,0,0,0,0,0,
 72,0,0,0,0,0,0,0, 80,0,0,0,0,0,0,0, 88,0,0,0,0,0,0,0, 96,0,0,0,0,0,0,0, 104,0,0,0,0,0,0,0,
 'm','a','i','n','.','x',0,0, 0,0,0,0,0,0,0,0, 'a','.','g','o',0,0,0,0, 2,2,0,0,0,0,0,0,
 0x40,0,0,0,24,0,0,0, 0x10,0,0,0,24,0,0,0, 0x20,0,0,0,0,0,0,0, 0,0,0,0,0,0,0,0 };
__attribute__((used, aligned(16))) static const char info[] = "\xff Go buildinf:\x08\x02";
int main(void) { printf("%d %s\n", fake[3], info); return 0; }
`
		if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := artifact(t, "gofind-magics", sh(`gcc -O1 -o $OUT `+src+` && strip --strip-all $OUT`))
		if b, err := os.ReadFile(bin); err != nil || !bytes.Contains(b, []byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8}) || !bytes.Contains(b, goBuildInfoMagic) {
			t.Fatalf("the C binary lacks the magics (%v)", err)
		}
		p := noSectionHeaders(t, bin, bin+"-bare")
		for _, path := range []string{bin, p} {
			m := openFileModule(t, New(Options{}), path)
			if info, ok := m.GoInfo(); ok {
				t.Errorf("%s: a C binary taken for Go: %+v", filepath.Base(path), info)
			}
			if m.GoFrames() != nil {
				t.Errorf("%s: Go frame sizes in a C binary", filepath.Base(path))
			}
		}
	})
}

// BenchmarkGoDiscovery: finding the pclntab, module data and version of a
// stripped PIE whose pclntab has no section header, then one frame size
// and name lookup per function.
func BenchmarkGoDiscovery(b *testing.B) {
	skipWithout(b, "go", "gcc", "objcopy", "strip")
	ref := artifact(b, "gofind-bench", sh(`cd $SRC/goprog && CGO_ENABLED=1 go build -trimpath -buildmode=pie -ldflags=-linkmode=external -o $OUT .`))
	bin := artifact(b, "gofind-bench-stripped", sh(`objcopy --rename-section .gopclntab=.data.rel.ro.pcln `+ref+` $OUT && strip --strip-all $OUT`))
	b.Run("load", func(b *testing.B) {
		for range b.N {
			m := openFileModule(b, New(Options{}), bin)
			if _, ok := m.GoInfo(); !ok {
				b.Fatal("no Go table")
			}
		}
	})
	if age, err := exec.LookPath("age"); err == nil {
		b.Run("load-debian-age", func(b *testing.B) {
			for range b.N {
				m := openFileModule(b, New(Options{}), age)
				if _, ok := m.GoInfo(); !ok {
					b.Fatal("no Go table")
				}
			}
		})
	}
	m := openFileModule(b, New(Options{}), bin)
	g := m.GoFrames()
	if g == nil {
		b.Fatal("no Go frames")
	}
	b.Run("framesize", func(b *testing.B) {
		pc := g.text
		for range b.N {
			if _, _, _, _, ok := g.FrameSize(pc + 0x40); !ok {
				b.Fatal("no frame size")
			}
		}
	})
}

// TestGoInlineWrongBase: an inline reader whose gofunc base is off (a
// moduledata layout this package misreads, as Go 1.27's once was) is
// refused, while the right one is taken.
func TestGoInlineWrongBase(t *testing.T) {
	skipWithout(t, "go", "gcc")
	bin := artifact(t, "gofind-inl", sh(`cd $SRC/goprog && go build -ldflags="-s -w" -o $OUT .`))
	g := openFileModule(t, New(Options{}), bin).sources().goTable()
	if g == nil || g.inl == nil {
		t.Fatal("no inline reader for goprog")
	}
	for _, d := range []uint64{8, 0x40, 0x1000} {
		bad := *g.inl
		bad.gofunc += d
		if bad.agrees(g.tab) {
			t.Errorf("gofunc off by %#x accepted", d)
		}
	}
}
