package hotspot

import (
	"fmt"
)

// BlobKind says what a code blob is, as far as walking through it goes.
type BlobKind uint8

const (
	BlobStub        BlobKind = iota // adapters, stubs, runtime blobs
	BlobInterpreter                 // the template interpreter's code
	BlobCompiled                    // an nmethod: a JIT-compiled Java method
	BlobNative                      // a native method's compiled wrapper
)

// Blob is a code blob of the code cache.
type Blob struct {
	Start, Size           uint64
	Name                  string
	Kind                  BlobKind
	FrameSize             uint64 // bytes from SP to the caller's SP (0: unknown)
	FrameComplete         uint64 // offset from Start: the frame is set up past it
	CodeBegin, CodeEnd    uint64
	method                uint64     // Method* (nmethods)
	pcs, pcsEnd           uint64     // the nmethod's PcDescs
	scopes, meta, metaEnd uint64     // its scopes data and metadata
	debug                 *debugInfo // read on first use
}

// maxHeaps bounds the code heaps (HotSpot has at most three, plus AOT).
const maxHeaps = 8

// codeHeap is one CodeHeap's reserved memory and its segment map.
type codeHeap struct {
	low, high uint64 // committed memory: blobs lie in [low, high)
	segmap    uint64 // the segment map's first byte
	log2Seg   uint64
}

// readHeaps reads CodeCache::_heaps.
func (vm *VM) readHeaps() error {
	l, m := vm.l, vm.m
	arr, err := m.u64(l.codeHeaps)
	if err != nil {
		return fmt.Errorf("the code cache cannot be read (%w)", err)
	}
	n, err := m.u32(arr + l.gaLen)
	if err != nil {
		return fmt.Errorf("the code cache cannot be read (%w)", err)
	}
	data, err := m.u64(arr + l.gaData)
	if err != nil || n == 0 || n > maxHeaps {
		return fmt.Errorf("the code cache's heaps cannot be read (%d heaps, %v)", n, err)
	}
	for i := uint64(0); i < uint64(n); i++ {
		h, err := m.u64(data + 8*i)
		if err != nil {
			return fmt.Errorf("code heap %d cannot be read (%w)", i, err)
		}
		var ch codeHeap
		var errs [4]error
		ch.low, errs[0] = m.u64(h + l.heapMemory + l.vsLow)
		ch.high, errs[1] = m.u64(h + l.heapMemory + l.vsHigh)
		ch.segmap, errs[2] = m.u64(h + l.heapSegmap + l.vsLow)
		var lg uint32
		lg, errs[3] = m.u32(h + l.heapLog2Seg)
		for _, e := range errs {
			if e != nil {
				return fmt.Errorf("code heap %d cannot be read (%w)", i, e)
			}
		}
		ch.log2Seg = uint64(lg)
		if ch.low > ch.high || lg < 4 || lg > 16 || ch.low < vm.codeLow || ch.high > vm.codeHigh {
			return fmt.Errorf("code heap %d is not one: %#x-%#x, segments of 2^%d bytes", i, ch.low, ch.high, lg)
		}
		vm.heaps = append(vm.heaps, ch)
	}
	return nil
}

// maxHops bounds the segment map's back links followed to a blob's start.
const maxHops = 4096

// blobStart finds the start of the blob holding pc from its heap's
// segment map (CodeHeap::find_start): 0 when pc is in no used block.
func (vm *VM) blobStart(pc uint64) uint64 {
	for _, h := range vm.heaps {
		if pc < h.low || pc >= h.high {
			continue
		}
		idx := (pc - h.low) >> h.log2Seg
		for hops := 0; hops < maxHops; hops++ {
			b, err := vm.m.u8(h.segmap + idx)
			if err != nil || b == 0xff {
				return 0
			}
			if b == 0 {
				block := h.low + idx<<h.log2Seg
				used, err := vm.m.u8(block + vm.l.heapBlockUsed)
				if err != nil || used == 0 {
					return 0
				}
				return block + vm.l.heapBlockSize
			}
			if uint64(b) > idx {
				return 0
			}
			idx -= uint64(b)
		}
		return 0
	}
	return 0
}

// maxBlobHeader bounds the header read of a blob (an nmethod's is 352
// bytes in JDK 17).
const maxBlobHeader = 1024

// BlobAt returns the code blob that holds pc, or nil.
func (vm *VM) BlobAt(pc uint64) *Blob {
	if !vm.InCodeCache(pc) {
		return nil
	}
	vm.mu.Lock()
	defer vm.mu.Unlock()
	start := vm.blobStart(pc)
	if start == 0 {
		return nil
	}
	if b, ok := vm.blobs[start]; ok {
		if b == nil || pc >= b.Start+b.Size {
			return nil
		}
		return b
	}
	b := vm.readBlob(start)
	if vm.blobs == nil || len(vm.blobs) >= maxCache {
		vm.blobs = map[uint64]*Blob{}
	}
	vm.blobs[start] = b
	if b == nil || pc >= b.Start+b.Size {
		return nil
	}
	return b
}

// readBlob reads and checks the blob at start (nil: not one).
func (vm *VM) readBlob(start uint64) *Blob {
	l := vm.l
	hdr := make([]byte, min(maxBlobHeader, max(l.nmScopesPcsOffset, l.nmDependenciesOffset, l.nmMetadataOffset, l.cmMethod, l.cmScopesDataBegin, l.cbName, l.nmEntryBCI)+8))
	if vm.m.read(hdr, start) != nil {
		return nil
	}
	i32 := func(off uint64) int64 {
		if off+4 > uint64(len(hdr)) {
			return -1
		}
		return int64(int32(uint32(le64(append(hdr[off:off+4:off+4], 0, 0, 0, 0)))))
	}
	u64 := func(off uint64) uint64 {
		if off+8 > uint64(len(hdr)) {
			return 0
		}
		return le64(hdr[off:])
	}
	b := &Blob{Start: start}
	size, frame, complete := i32(l.cbSize), i32(l.cbFrameSize), i32(l.cbFrameComplete)
	if size <= 0 || frame < 0 || frame > 1<<16 {
		return nil
	}
	b.Size, b.FrameSize = uint64(size), uint64(frame)*8
	if complete > 0 {
		b.FrameComplete = uint64(complete)
	}
	b.CodeBegin, b.CodeEnd = u64(l.cbCodeBegin), u64(l.cbCodeEnd)
	if b.CodeBegin < start || b.CodeEnd < b.CodeBegin || b.CodeEnd > start+b.Size {
		return nil
	}
	name, err := vm.m.cstring(u64(l.cbName), 128)
	if err != nil || !printable(name) {
		return nil
	}
	b.Name = name
	switch {
	case name == "Interpreter":
		b.Kind = BlobInterpreter
	case name == "nmethod" || name == "native nmethod":
		b.Kind = BlobCompiled
		if name == "native nmethod" {
			b.Kind = BlobNative
		}
		b.method = u64(l.cmMethod)
		b.scopes = u64(l.cmScopesDataBegin)
		pcs, deps, meta := i32(l.nmScopesPcsOffset), i32(l.nmDependenciesOffset), i32(l.nmMetadataOffset)
		if b.method == 0 || pcs < 0 || deps < pcs || meta < 0 || uint64(deps) > b.Size {
			return nil
		}
		b.pcs, b.pcsEnd = start+uint64(pcs), start+uint64(deps)
		b.meta, b.metaEnd = start+uint64(meta), b.scopes
	}
	return b
}
