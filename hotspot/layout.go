package hotspot

import (
	"fmt"
	"sort"
	"strings"
)

// layout is every offset, size, static address and constant the reader
// uses, taken from a JVM's tables at Open: the rest of the package reads
// no number of HotSpot's from anywhere else (frame_x86.go derives the
// interpreter frame's slots from the exported ones).
type layout struct {
	// optional: statics used when the tables have them
	optional                                                map[string]uint64
	arrayU2Data, fieldAccess, fieldInternal, fieldTagOffset uint64
	interpSenderSP                                          int64
	// statics (addresses)
	javaThreadList, codeHeaps, codeLow, codeHigh       uint64
	vmRelease, narrowOopBase, narrowOopShift           uint64
	narrowKlassBase, narrowKlassShift, flags, numFlags uint64
	// Thread and friends
	threadsListLength, threadsListThreads                        uint64
	jtOSThread, jtThreadObj, jtState, jtStackBase, jtStackSize   uint64
	jtPendingMonitor, jtWaitingMonitor, oopHandleObj, osThreadID uint64
	jtAnchor, anchorSP, anchorPC, anchorFP                       uint64
	// code cache
	gaLen, gaData, heapMemory, heapSegmap, heapLog2Seg         uint64
	vsLowBoundary, vsHighBoundary, vsLow, vsHigh               uint64
	heapBlockSize, heapBlockUsed                               uint64
	cbName, cbSize, cbHeaderSize, cbFrameSize, cbFrameComplete uint64
	cbCodeBegin, cbCodeEnd                                     uint64
	cmMethod, cmScopesDataBegin                                uint64
	nmScopesPcsOffset, nmDependenciesOffset, nmMetadataOffset  uint64
	nmEntryBCI, nmCompLevel                                    uint64
	pcDescSize, pcPCOffset, pcScopeDecode                      uint64
	// metadata
	methodConst, methodAccess, cmConstants, cmCodeSize, cmNameIndex, cmSigIndex, cmFlags uint64
	constMethodSize, cpHolder, cpSourceFile, cpSize, cpLength                            uint64
	klassName, klassSuper, ikFields, ikConstants, ikJavaFieldsCount                      uint64
	symLength, symBody                                                                   uint64
	oopKlass, narrowKlassField                                                           uint64
	monitorObject, monitorOwner                                                          uint64
	basicObjectLockSize, heapWordSize                                                    uint64
	// constants
	hasLineNumbers, fieldSlots, fieldNameIndex, fieldSigIndex, fieldLow, fieldHigh uint64
	fieldTagSize, utf8Tag                                                          uint64
	stateInJava, stateInVM, stateInNative, stateBlocked                            int64
	interpLastSP                                                                   int64
	invocationEntryBCI                                                             int64
	monitorValue, lockMask                                                         uint64
	flagSize, flagAddr, flagName                                                   uint64
}

// layoutBuilder reads a layout from the tables, collecting every name
// they lack.
type layoutBuilder struct {
	t       *Tables
	missing []string
}

func (b *layoutBuilder) off(name string) uint64 {
	f, ok := b.t.Fields[name]
	if !ok || f.Static {
		b.missing = append(b.missing, name)
		return 0
	}
	return f.Offset
}

func (b *layoutBuilder) static(name string) uint64 {
	f, ok := b.t.Fields[name]
	if !ok || !f.Static || f.Address == 0 {
		b.missing = append(b.missing, name)
		return 0
	}
	return f.Address
}

func (b *layoutBuilder) size(name string) uint64 {
	s, ok := b.t.Sizes[name]
	if !ok || s == 0 {
		b.missing = append(b.missing, "sizeof("+name+")")
	}
	return s
}

func (b *layoutBuilder) constant(name string) int64 {
	c, ok := b.t.Constants[name]
	if !ok {
		b.missing = append(b.missing, name)
	}
	return c
}

func (b *layoutBuilder) ucon(name string) uint64 {
	c := b.constant(name)
	if c < 0 || c > 1<<20 {
		b.missing = append(b.missing, name+" (out of range)")
		return 0
	}
	return uint64(c)
}

// newLayout takes what the reader needs from the tables; a table that
// lacks any of it is an error naming what is missing.
func newLayout(t *Tables) (*layout, error) {
	b := &layoutBuilder{t: t}
	l := &layout{}
	b.statics(l)
	b.threads(l)
	b.code(l)
	b.metadata(l)
	b.constants(l)
	l.optional = map[string]uint64{}
	if f, ok := t.Fields["StubRoutines::_call_stub_return_address"]; ok && f.Static {
		l.optional["StubRoutines::_call_stub_return_address"] = f.Address
	}
	if len(b.missing) > 0 {
		sort.Strings(b.missing)
		if len(b.missing) > 8 {
			b.missing = append(b.missing[:8], "...")
		}
		return nil, fmt.Errorf("the JVM's tables lack %s", strings.Join(b.missing, ", "))
	}
	return l, nil
}

func (b *layoutBuilder) statics(l *layout) {
	l.javaThreadList = b.static("ThreadsSMRSupport::_java_thread_list")
	l.codeHeaps = b.static("CodeCache::_heaps")
	l.codeLow = b.static("CodeCache::_low_bound")
	l.codeHigh = b.static("CodeCache::_high_bound")
	l.vmRelease = b.static("Abstract_VM_Version::_s_vm_release")
	l.narrowOopBase = b.static("CompressedOops::_narrow_oop._base")
	l.narrowOopShift = b.static("CompressedOops::_narrow_oop._shift")
	l.narrowKlassBase = b.static("CompressedKlassPointers::_narrow_klass._base")
	l.narrowKlassShift = b.static("CompressedKlassPointers::_narrow_klass._shift")
	l.flags = b.static("JVMFlag::flags")
	l.numFlags = b.static("JVMFlag::numFlags")
}

func (b *layoutBuilder) threads(l *layout) {
	l.threadsListLength = b.off("ThreadsList::_length")
	l.threadsListThreads = b.off("ThreadsList::_threads")
	l.jtOSThread = b.off("JavaThread::_osthread")
	l.jtThreadObj = b.off("JavaThread::_threadObj")
	l.jtState = b.off("JavaThread::_thread_state")
	l.jtStackBase = b.off("JavaThread::_stack_base")
	l.jtStackSize = b.off("JavaThread::_stack_size")
	l.jtPendingMonitor = b.off("JavaThread::_current_pending_monitor")
	l.jtWaitingMonitor = b.off("JavaThread::_current_waiting_monitor")
	l.jtAnchor = b.off("JavaThread::_anchor")
	l.anchorSP = b.off("JavaFrameAnchor::_last_Java_sp")
	l.anchorPC = b.off("JavaFrameAnchor::_last_Java_pc")
	l.anchorFP = b.off("JavaFrameAnchor::_last_Java_fp")
	l.oopHandleObj = b.off("OopHandle::_obj")
	l.osThreadID = b.off("OSThread::_thread_id")
	l.monitorObject = b.off("ObjectMonitor::_object")
	l.monitorOwner = b.off("ObjectMonitor::_owner")
	l.basicObjectLockSize = b.size("BasicObjectLock")
}

func (b *layoutBuilder) code(l *layout) {
	l.gaLen = b.off("GrowableArrayBase::_len")
	l.gaData = b.off("GrowableArray<int>::_data")
	l.heapMemory = b.off("CodeHeap::_memory")
	l.heapSegmap = b.off("CodeHeap::_segmap")
	l.heapLog2Seg = b.off("CodeHeap::_log2_segment_size")
	l.vsLowBoundary = b.off("VirtualSpace::_low_boundary")
	l.vsHighBoundary = b.off("VirtualSpace::_high_boundary")
	l.vsLow = b.off("VirtualSpace::_low")
	l.vsHigh = b.off("VirtualSpace::_high")
	l.heapBlockSize = b.size("HeapBlock")
	l.heapBlockUsed = b.off("HeapBlock::_header") + b.off("HeapBlock::Header::_used")
	l.cbName = b.off("CodeBlob::_name")
	l.cbSize = b.off("CodeBlob::_size")
	l.cbHeaderSize = b.off("CodeBlob::_header_size")
	l.cbFrameSize = b.off("CodeBlob::_frame_size")
	l.cbFrameComplete = b.off("CodeBlob::_frame_complete_offset")
	l.cbCodeBegin = b.off("CodeBlob::_code_begin")
	l.cbCodeEnd = b.off("CodeBlob::_code_end")
	l.cmMethod = b.off("CompiledMethod::_method")
	l.cmScopesDataBegin = b.off("CompiledMethod::_scopes_data_begin")
	l.nmScopesPcsOffset = b.off("nmethod::_scopes_pcs_offset")
	l.nmDependenciesOffset = b.off("nmethod::_dependencies_offset")
	l.nmMetadataOffset = b.off("nmethod::_metadata_offset")
	l.nmEntryBCI = b.off("nmethod::_entry_bci")
	l.nmCompLevel = b.off("nmethod::_comp_level")
	l.pcDescSize = b.size("PcDesc")
	l.pcPCOffset = b.off("PcDesc::_pc_offset")
	l.pcScopeDecode = b.off("PcDesc::_scope_decode_offset")
}

func (b *layoutBuilder) metadata(l *layout) {
	l.methodConst = b.off("Method::_constMethod")
	l.methodAccess = b.off("Method::_access_flags")
	l.cmConstants = b.off("ConstMethod::_constants")
	l.cmCodeSize = b.off("ConstMethod::_code_size")
	l.cmNameIndex = b.off("ConstMethod::_name_index")
	l.cmSigIndex = b.off("ConstMethod::_signature_index")
	l.cmFlags = b.off("ConstMethod::_flags")
	l.constMethodSize = b.size("ConstMethod")
	l.cpHolder = b.off("ConstantPool::_pool_holder")
	l.cpSourceFile = b.off("ConstantPool::_source_file_name_index")
	l.cpLength = b.off("ConstantPool::_length")
	l.cpSize = b.size("ConstantPool")
	l.klassName = b.off("Klass::_name")
	l.klassSuper = b.off("Klass::_super")
	l.ikFields = b.off("InstanceKlass::_fields")
	l.ikConstants = b.off("InstanceKlass::_constants")
	l.ikJavaFieldsCount = b.off("InstanceKlass::_java_fields_count")
	l.arrayU2Data = b.off("Array<u2>::_data")
	l.symLength = b.off("Symbol::_length")
	l.symBody = b.off("Symbol::_body")
	l.oopKlass = b.off("oopDesc::_metadata._klass")
	l.narrowKlassField = b.off("oopDesc::_metadata._compressed_klass")
	l.flagSize = b.size("JVMFlag")
	l.flagAddr = b.off("JVMFlag::_addr")
	l.flagName = b.off("JVMFlag::_name")
}

func (b *layoutBuilder) constants(l *layout) {
	l.hasLineNumbers = b.ucon("ConstMethod::_has_linenumber_table")
	l.fieldSlots = b.ucon("FieldInfo::field_slots")
	l.fieldNameIndex = b.ucon("FieldInfo::name_index_offset")
	l.fieldSigIndex = b.ucon("FieldInfo::signature_index_offset")
	l.fieldLow = b.ucon("FieldInfo::low_packed_offset")
	l.fieldHigh = b.ucon("FieldInfo::high_packed_offset")
	l.fieldTagSize = b.ucon("FIELDINFO_TAG_SIZE")
	l.fieldTagOffset = b.ucon("FIELDINFO_TAG_OFFSET")
	l.fieldAccess = b.ucon("FieldInfo::access_flags_offset")
	l.fieldInternal = b.ucon("JVM_ACC_FIELD_INTERNAL")
	l.utf8Tag = b.ucon("JVM_CONSTANT_Utf8")
	l.stateInJava = b.constant("_thread_in_Java")
	l.stateInVM = b.constant("_thread_in_vm")
	l.stateInNative = b.constant("_thread_in_native")
	l.stateBlocked = b.constant("_thread_blocked")
	l.interpLastSP = b.constant("frame::interpreter_frame_last_sp_offset")
	l.interpSenderSP = b.constant("frame::interpreter_frame_sender_sp_offset")
	l.invocationEntryBCI = b.constant("InvocationEntryBci")
	l.monitorValue = b.ucon("markWord::monitor_value")
	l.lockMask = b.ucon("markWord::lock_mask_in_place")
	l.heapWordSize = b.ucon("HeapWordSize")
}
