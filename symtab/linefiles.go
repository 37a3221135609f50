package symtab

import (
	"encoding/binary"
	"strings"

	"stackshot/internal/bin"
)

// maxLineFiles bounds the directory and file tables of one line program.
const maxLineFiles = 1 << 20

// cstrAt is the NUL-terminated string at off in sec.
func cstrAt(sec []byte, off uint64) string { return bin.CStringAt(sec, off) }

// DWARF 5 line table content types and forms used in its entry formats.
const (
	lnctPath     = 1
	lnctDirIndex = 2

	formBlock    = 0x09
	formData1    = 0x0b
	formData2    = 0x05
	formData4    = 0x06
	formData8    = 0x07
	formData16   = 0x1e
	formString   = 0x08
	formStrp     = 0x0e
	formUdata    = 0x0f
	formLineStrp = 0x1f
	formStrx     = 0x1a
	formStrx1    = 0x25
	formStrx2    = 0x26
	formStrx3    = 0x27
	formStrx4    = 0x28
	formSdata    = 0x0d
)

// lineFileNames reads the file table of the line program at off in
// .debug_line and names each file (by DWARF file index) the way binutils
// does: an absolute name as is; otherwise COMP_DIR/DIR/NAME, with DIR
// dropped when absent and COMP_DIR dropped when DIR is absolute. (Go's
// debug/dwarf cleans paths and leaves out the compilation directory of
// DWARF 5 tables, so its names differ from what every other tool prints.)
func lineFileNames(line []byte, off uint64, order binary.ByteOrder, compDir string, str, lineStr []byte) ([]string, bool) {
	if off >= uint64(len(line)) {
		return nil, false
	}
	r := bin.NewReader(line[off:], order)
	length := uint64(r.U32())
	dwarf64 := false
	if length == 0xffffffff {
		length = r.U64()
		dwarf64 = true
	}
	if r.Err() != nil || length > uint64(r.Left()) {
		return nil, false
	}
	r.B = r.B[:r.Off+int(length)]
	version := r.U16()
	if version < 2 || version > 5 {
		return nil, false
	}
	if version >= 5 {
		r.U8() // address_size
		r.U8() // segment_selector_size
	}
	var hlen uint64
	if dwarf64 {
		hlen = r.U64()
	} else {
		hlen = uint64(r.U32())
	}
	if r.Err() != nil || hlen > uint64(r.Left()) {
		return nil, false
	}
	r.B = r.B[:r.Off+int(hlen)]
	r.U8() // minimum_instruction_length
	if version >= 4 {
		r.U8() // maximum_operations_per_instruction
	}
	r.U8() // default_is_stmt
	r.U8() // line_base
	r.U8() // line_range
	opBase := uint64(r.U8())
	if opBase > 0 {
		r.Bytes(opBase - 1)
	}
	if r.Err() != nil {
		return nil, false
	}
	type fileEnt struct {
		name string
		dir  uint64
	}
	var dirs []string
	var files []fileEnt
	if version < 5 {
		for len(dirs) < maxLineFiles {
			d := string(r.CString())
			if r.Err() != nil || d == "" {
				break
			}
			dirs = append(dirs, d)
		}
		files = append(files, fileEnt{}) // file numbers start at 1
		for len(files) < maxLineFiles {
			n := string(r.CString())
			if r.Err() != nil || n == "" {
				break
			}
			d := r.ULEB()
			r.ULEB() // mtime
			r.ULEB() // length
			files = append(files, fileEnt{n, d})
		}
	} else {
		readTable := func(each func(path string, dir uint64)) bool {
			nfmt := uint64(r.U8())
			type lf struct{ lnct, form uint64 }
			fmts := make([]lf, 0, nfmt)
			for i := uint64(0); i < nfmt; i++ {
				fmts = append(fmts, lf{r.ULEB(), r.ULEB()})
			}
			count := r.ULEB()
			if r.Err() != nil || count > maxLineFiles || count > uint64(r.Left()) {
				return false
			}
			for i := uint64(0); i < count && r.Err() == nil; i++ {
				var p string
				var dir uint64
				for _, f := range fmts {
					var s string
					var v uint64
					switch f.form {
					case formString:
						s = string(r.CString())
					case formLineStrp, formStrp:
						var o uint64
						if dwarf64 {
							o = r.U64()
						} else {
							o = uint64(r.U32())
						}
						if f.form == formLineStrp {
							s = cstrAt(lineStr, o)
						} else {
							s = cstrAt(str, o)
						}
					case formUdata:
						v = r.ULEB()
					case formSdata:
						v = r.ULEB()
					case formData1, formStrx1:
						v = uint64(r.U8())
					case formData2, formStrx2:
						v = uint64(r.U16())
					case formStrx3:
						r.Bytes(3)
					case formData4, formStrx4:
						v = uint64(r.U32())
					case formData8:
						v = r.U64()
					case formData16:
						r.Bytes(16)
					case formBlock:
						r.Bytes(r.ULEB())
					case formStrx:
						r.ULEB()
					default:
						return false // unknown form: cannot skip it
					}
					switch f.lnct {
					case lnctPath:
						p = s
					case lnctDirIndex:
						dir = v
					}
				}
				each(p, dir)
			}
			return r.Err() == nil
		}
		if !readTable(func(p string, _ uint64) { dirs = append(dirs, p) }) {
			return nil, false
		}
		if !readTable(func(p string, d uint64) { files = append(files, fileEnt{p, d}) }) {
			return nil, false
		}
	}
	if r.Err() != nil && len(files) == 0 {
		return nil, false
	}
	names := make([]string, len(files))
	for i, f := range files {
		if f.name == "" {
			continue
		}
		if strings.HasPrefix(f.name, "/") {
			names[i] = f.name
			continue
		}
		var sub string
		haveSub := false
		d := f.dir
		if version < 5 {
			d-- // 0 (the compilation directory) wraps: no subdirectory
		}
		if d < uint64(len(dirs)) {
			sub, haveSub = dirs[d], true
		}
		dirName := ""
		if (!haveSub || !strings.HasPrefix(sub, "/")) && compDir != "." {
			// (a compilation directory of ".", as Go's -trimpath writes,
			// adds nothing: the runtime and gdb name "prog/main.go")
			dirName = compDir
		}
		if dirName == "" {
			dirName, sub, haveSub = sub, "", false
		}
		switch {
		case dirName == "":
			names[i] = f.name
		case haveSub:
			names[i] = dirName + "/" + sub + "/" + f.name
		default:
			names[i] = dirName + "/" + f.name
		}
	}
	return names, true
}
