package symtab

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestFastWalkMatchesDebugDWARF decodes every compilation unit of real
// binaries three times: with the fast DIE walk through a per-unit view
// (dataFor), with debug/dwarf alone through that view, and with
// debug/dwarf alone through one dwarf.New of the whole section, as
// before either existed. It expects the same function trees: both may
// only be faster.
func TestFastWalkMatchesDebugDWARF(t *testing.T) {
	files := map[string]string{}
	for _, v := range []string{"dwarf5", "dwarf4", "gz-zlib-gnu", "O0-dwarf4"} {
		files["cxxprog-"+v] = cxxDebug(t, v)
	}
	// glibc's separate debug file (libc6-dbg), when installed: DWARF 5
	// from another compiler run, with thousands of units.
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if ef, err := elf.Open(libc); err == nil {
		st, _ := os.Stat(libc)
		if id, err := elfBuildID(ef, st.Size()); err == nil && len(id) > 2 {
			dbg := filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
			if _, err := os.Stat(dbg); err == nil {
				files["libc-debug"] = dbg
			}
		}
		ef.Close()
	}
	// libcephfs's debug file (libcephfs2-dbg), when installed: large C++
	// units (14 of them, 57 MB), zlib-compressed.
	const cephfs = "/usr/lib/debug/.build-id/ea/39c6b10761daf9ebc677c887882dfde5dda942.debug"
	if _, err := os.Stat(cephfs); err == nil {
		files["cephfs-debug"] = cephfs
	}
	for name, path := range files {
		t.Run(name, func(t *testing.T) {
			s := New(Options{})
			defer s.Close()
			m := openFileModule(t, s, path)
			x := m.sources().dw
			if x == nil {
				t.Fatalf("%s: no DWARF", path)
			}
			if err := x.data(); err != nil {
				t.Fatal(err)
			}
			full, err := x.newData(x.info)
			if err != nil {
				t.Fatal(err)
			}
			fast, slow, ranged := 0, 0, 0
			for _, cu := range x.cus {
				a, b, c := &cuDecoded{}, &cuDecoded{}, &cuDecoded{}
				errA := safely("fast", func() error { return x.decode(cu.off, a) })
				x.slowWalk = true
				errB := safely("slow", func() error { return x.decode(cu.off, b) })
				x.d = full
				errC := safely("whole", func() error { return x.decode(cu.off, c) })
				x.slowWalk, x.d = false, nil
				if (errA == nil) != (errB == nil) || (a.err == nil) != (b.err == nil) ||
					(errA == nil) != (errC == nil) || (a.err == nil) != (c.err == nil) {
					t.Fatalf("unit %#x: errors %v/%v, %v/%v and %v/%v", cu.off, errA, a.err, errB, b.err, errC, c.err)
				}
				// The cache's encoding: sized right, and read back whole
				// (encoded again, the same bytes).
				enc := encodeUnit(a)
				if table, _ := unitStrings(a); len(enc) != unitSize(a, table) || cap(enc) != len(enc) {
					t.Fatalf("unit %#x: encoded in %d bytes, unitSize says %d", cu.off, len(enc), unitSize(a, table))
				}
				if back, err := decodeUnit(enc); err != nil || !bytes.Equal(encodeUnit(back), enc) {
					t.Fatalf("unit %#x: its encoding does not read back (%v)", cu.off, err)
				}
				a.dem, b.dem, c.dem = nil, nil, nil
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("unit %#x: the fast walk found %d nodes, %d functions; debug/dwarf %d, %d",
						cu.off, len(a.nodes), len(a.funcs), len(b.nodes), len(b.funcs))
				}
				if !reflect.DeepEqual(b, c) {
					t.Fatalf("unit %#x: the unit's view found %d nodes, %d functions, %d rows; the whole section's %d, %d, %d",
						cu.off, len(b.nodes), len(b.funcs), len(b.rows), len(c.nodes), len(c.funcs), len(c.rows))
				}
				// And the fast walk did the work: gcc's DWARF has nothing
				// it does not know.
				d, err := x.dataFor(cu.off)
				if err != nil {
					t.Fatal(err)
				}
				r := d.Reader()
				r.Seek(cu.off)
				if e, err := r.Next(); err == nil && e != nil && e.Children {
					w := newDieWalk(x, d, &cuDecoded{})
					if !x.walkFast(e, r, w) {
						t.Fatalf("unit %#x: the fast walk gave up", cu.off)
					}
					// Nor did it need debug/dwarf for any DIE it kept.
					if w.viaReader > 0 {
						t.Fatalf("unit %#x: the fast walk read %d DIEs through debug/dwarf", cu.off, w.viaReader)
					}
				}
				// dieWalk.ranges (the unit's DIE read once for the base)
				// gives what d.Ranges does, for every DIE with a range list.
				r.Seek(cu.off)
				if cuE, err := r.Next(); err == nil && cuE != nil {
					w := newDieWalk(x, d, &cuDecoded{})
					w.cu = cuE
					for n := 0; cuE.Children && n < maxUnitDIEs; n++ {
						e, err := r.Next()
						if err != nil || e == nil || e.Tag == dwarf.TagCompileUnit {
							break
						}
						if e.AttrField(dwarf.AttrRanges) == nil {
							continue
						}
						want, errW := d.Ranges(e)
						got, errG := w.ranges(e)
						if !reflect.DeepEqual(got, want) || (errG == nil) != (errW == nil) {
							t.Fatalf("DIE %#x: ranges %v (%v), d.Ranges %v (%v)", e.Offset, got, errG, want, errW)
						}
						ranged++
					}
				}
				if len(a.nodes) > 0 {
					fast++
				}
				slow += len(b.nodes)
			}
			if fast == 0 || slow == 0 {
				t.Fatalf("%s: no unit has functions", path)
			}
			t.Logf("%s: %d units with functions, %d nodes, %d DIEs with range lists", name, fast, slow, ranged)
		})
	}
}
