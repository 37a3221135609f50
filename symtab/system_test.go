package symtab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemLibc symbolizes the system's libc through its separate debug
// file in /usr/lib/debug/.build-id (libc6-dbg), as addr2line finds it too,
// and expects addr2line's files, lines and frame counts, and a physical
// function name that nm lists at that function's address. (For inlined C
// functions, which have no linkage name, addr2line prints the enclosing
// ELF symbol instead of the inlined function's name; those names are not
// compared.)
func TestSystemLibc(t *testing.T) {
	skipWithout(t, "nm", "addr2line", "readelf")
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skipf("no %s on this machine", libc)
	}
	id := readelfBuildID(t, libc)
	dbg := filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
	if _, err := os.Stat(dbg); err != nil {
		t.Skipf("libc's debug file (libc6-dbg) is not installed: %v", err)
	}
	s := New(Options{})
	defer s.Close()
	m := openFileModule(t, s, libc)
	if m.DebugFile() != dbg {
		t.Fatalf("DebugFile = %q, want %q", m.DebugFile(), dbg)
	}
	// Aliases by address, from the debug file's full symbol table.
	byAddr := map[uint64]map[string]bool{}
	for _, sym := range runNM(t, dbg, false) {
		if isFuncType(sym.typ) {
			if byAddr[sym.addr] == nil {
				byAddr[sym.addr] = map[string]bool{}
			}
			name, _, _ := strings.Cut(sym.name, "@") // symbol version
			byAddr[sym.addr][name] = true
		}
	}
	var funcs []nmSym
	for _, sym := range runNM(t, libc, false, "-D") {
		if isFuncType(sym.typ) && sym.hasSize && sym.size > 16 {
			funcs = append(funcs, sym)
		}
	}
	var pcs []uint64
	var starts []uint64
	for i := 0; i < len(funcs); i += 7 {
		f := funcs[i]
		for _, d := range []uint64{0, f.size / 3, f.size - 1} {
			pcs = append(pcs, f.addr+d)
			starts = append(starts, f.addr)
		}
	}
	if len(pcs) < 300 {
		t.Fatalf("only %d pcs", len(pcs))
	}
	want := runAddr2line(t, libc, true, pcs)
	// binutils 2.40 names the unit's primary file instead of an #included
	// .c file for some DWARF 5 rows (nss/getXXent_r.c included by
	// inet/getprtent_r.c): where only the innermost file differs, gdb
	// decides.
	var disputed []int
	for i, pc := range pcs {
		got := fromSyms(m.Lookup(pc, nil))
		w := want[i]
		if len(got) == len(w) && got[0].file != w[0].file && got[0].line == w[0].line {
			disputed = append(disputed, i)
		}
	}
	var gdbPCs []uint64
	for _, i := range disputed {
		gdbPCs = append(gdbPCs, pcs[i])
	}
	gdbSays := map[uint64]a2lFrame{}
	if len(gdbPCs) > 0 {
		skipWithout(t, "gdb")
		for k, f := range gdbLines(t, libc, gdbPCs) {
			gdbSays[gdbPCs[k]] = f
		}
	}
	bad := 0
	for i, pc := range pcs {
		got := fromSyms(m.Lookup(pc, nil))
		w := append([]a2lFrame(nil), want[i]...)
		// gdb confirms the file (its row choice at a function's first
		// address may differ; the line itself is not in dispute).
		if g, ok := gdbSays[pc]; ok && filepath.Base(g.file) == filepath.Base(got[0].file) &&
			strings.HasSuffix(got[0].file, strings.TrimPrefix(g.file, "..")) {
			w[0].file = got[0].file
		}
		ok := len(got) == len(w)
		for k := 0; ok && k < len(got); k++ {
			ok = got[k].file == w[k].file && got[k].line == w[k].line
		}
		if ok {
			outer := got[len(got)-1].fn
			ok = byAddr[starts[i]][outer] || outer == w[len(w)-1].fn
		}
		if !ok {
			bad++
			if bad <= 10 {
				t.Errorf("%#x: got %+v\n\taddr2line %+v\n\tgdb %+v\n\tsymbols at %#x: %v", pc, got, w, gdbSays[pc], starts[i], strings.Join(keys(byAddr[starts[i]]), " "))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d pcs differ", bad, len(pcs))
	}
}
