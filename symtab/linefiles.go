package symtab

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// maxLineFiles bounds the directory and file tables of one line program.
const maxLineFiles = 1 << 20

// lineBuf is a sticky-error reader over a line program header: after the
// first error every read returns zero.
type lineBuf struct {
	b     []byte
	order binary.ByteOrder
	bad   bool
}

func (r *lineBuf) take(n uint64) []byte {
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *lineBuf) u8() uint64 {
	if b := r.take(1); b != nil {
		return uint64(b[0])
	}
	return 0
}

func (r *lineBuf) u16() uint64 {
	if b := r.take(2); b != nil {
		return uint64(r.order.Uint16(b))
	}
	return 0
}

func (r *lineBuf) u32() uint64 {
	if b := r.take(4); b != nil {
		return uint64(r.order.Uint32(b))
	}
	return 0
}

func (r *lineBuf) u64() uint64 {
	if b := r.take(8); b != nil {
		return r.order.Uint64(b)
	}
	return 0
}

func (r *lineBuf) uleb() uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b := r.take(1)
		if b == nil {
			return 0
		}
		if shift < 64 {
			v |= uint64(b[0]&0x7f) << shift
		}
		if b[0]&0x80 == 0 {
			return v
		}
		if shift > 70 {
			r.bad = true
			return 0
		}
	}
}

func (r *lineBuf) cstr() string {
	i := bytes.IndexByte(r.b, 0)
	if r.bad || i < 0 {
		r.bad = true
		return ""
	}
	s := string(r.b[:i])
	r.b = r.b[i+1:]
	return s
}

func cstrAt(sec []byte, off uint64) string {
	if off >= uint64(len(sec)) {
		return ""
	}
	s := sec[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return string(s[:i])
	}
	return ""
}

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
	r := &lineBuf{b: line[off:], order: order}
	length := r.u32()
	dwarf64 := false
	if length == 0xffffffff {
		length = r.u64()
		dwarf64 = true
	}
	if r.bad || length > uint64(len(r.b)) {
		return nil, false
	}
	r.b = r.b[:length]
	version := r.u16()
	if version < 2 || version > 5 {
		return nil, false
	}
	if version >= 5 {
		r.u8() // address_size
		r.u8() // segment_selector_size
	}
	var hlen uint64
	if dwarf64 {
		hlen = r.u64()
	} else {
		hlen = r.u32()
	}
	if r.bad || hlen > uint64(len(r.b)) {
		return nil, false
	}
	r.b = r.b[:hlen]
	r.u8() // minimum_instruction_length
	if version >= 4 {
		r.u8() // maximum_operations_per_instruction
	}
	r.u8() // default_is_stmt
	r.u8() // line_base
	r.u8() // line_range
	opBase := r.u8()
	if opBase > 0 {
		r.take(opBase - 1)
	}
	if r.bad {
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
			d := r.cstr()
			if r.bad || d == "" {
				break
			}
			dirs = append(dirs, d)
		}
		files = append(files, fileEnt{}) // file numbers start at 1
		for len(files) < maxLineFiles {
			n := r.cstr()
			if r.bad || n == "" {
				break
			}
			d := r.uleb()
			r.uleb() // mtime
			r.uleb() // length
			files = append(files, fileEnt{n, d})
		}
	} else {
		readTable := func(each func(path string, dir uint64)) bool {
			nfmt := r.u8()
			type lf struct{ lnct, form uint64 }
			fmts := make([]lf, 0, nfmt)
			for i := uint64(0); i < nfmt; i++ {
				fmts = append(fmts, lf{r.uleb(), r.uleb()})
			}
			count := r.uleb()
			if r.bad || count > maxLineFiles || count > uint64(len(r.b)) {
				return false
			}
			for i := uint64(0); i < count && !r.bad; i++ {
				var p string
				var dir uint64
				for _, f := range fmts {
					var s string
					var v uint64
					switch f.form {
					case formString:
						s = r.cstr()
					case formLineStrp, formStrp:
						var o uint64
						if dwarf64 {
							o = r.u64()
						} else {
							o = r.u32()
						}
						if f.form == formLineStrp {
							s = cstrAt(lineStr, o)
						} else {
							s = cstrAt(str, o)
						}
					case formUdata:
						v = r.uleb()
					case formSdata:
						v = r.uleb()
					case formData1, formStrx1:
						v = r.u8()
					case formData2, formStrx2:
						v = r.u16()
					case formStrx3:
						r.take(3)
					case formData4, formStrx4:
						v = r.u32()
					case formData8:
						v = r.u64()
					case formData16:
						r.take(16)
					case formBlock:
						r.take(r.uleb())
					case formStrx:
						r.uleb()
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
			return !r.bad
		}
		if !readTable(func(p string, _ uint64) { dirs = append(dirs, p) }) {
			return nil, false
		}
		if !readTable(func(p string, d uint64) { files = append(files, fileEnt{p, d}) }) {
			return nil, false
		}
	}
	if r.bad && len(files) == 0 {
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
		if !haveSub || !strings.HasPrefix(sub, "/") {
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
