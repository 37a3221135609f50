package resolve

import "stackshot/procmaps"

// DataName names the global or static object at addr in the space's
// process ("pool_lock", "accounts+0x40"), or "". An address in the
// anonymous mapping right after a module's last file mapping (its .bss
// past the file's end) belongs to that module.
func (s *Space) DataName(addr uint64) string {
	i := -1
	for k := range s.maps {
		if s.maps[k].Contains(addr) {
			i = k
			break
		}
	}
	if i < 0 {
		return ""
	}
	m := &s.maps[i]
	if m.Kind == procmaps.KindAnon && i > 0 && s.maps[i-1].End == m.Start && s.maps[i-1].Kind == procmaps.KindFile {
		m = &s.maps[i-1]
	}
	if m.Kind != procmaps.KindFile {
		return ""
	}
	e := s.module(m)
	if e.mod == nil || !e.ok || e.mod.Mismatch() {
		return ""
	}
	if n := e.mod.DataName(addr - e.bias); n != "" {
		return n
	}
	// (no debug file: a standard stream's lock is a static of libc,
	// named from its .dynsym)
	return s.stdioLockName(e, addr)
}
