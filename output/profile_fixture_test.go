package output

import (
	"stackshot/report"
	"time"
)

// The fixture: two processes as a sampler would report them.
//
// myserver (pid 4242, a PIE loaded at 0x55d0c0a00000, libc at
// 0x7f3a1c000000) has worker threads in hot_a (with hot_a_inner inlined into
// it, under a C++ operator<< and main), in hot_b, in the kernel, and in a
// stripped library; one function has a name with ';' and a newline.
// "batch;job" (pid 5151, non-PIE, libc at 0x7f1100000000) runs crunch and
// some JIT code outside any module, and one truncated stack of unknown
// kernel frames.

const (
	fxExe       = "/usr/sbin/myserver"
	fxExeID     = "4f1e2d3c4b5a69788796a5b4c3d2e1f001122334"
	fxLibc      = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	fxLibcID    = "a1b2c3d4e5f60718293a4b5c6d7e8f9000112233"
	fxLibfoo    = "/opt/vendor/lib/libfoo.so.1"
	fxLibfooID  = "0badc0de0badc0de0badc0de0badc0de0badc0de"
	fxBatch     = "/opt/batch/bin/batch"
	fxBatchID   = "cafef00dcafef00dcafef00dcafef00dcafef00d"
	fxExeBias   = 0x55d0c0a00000
	fxLibcBias1 = 0x7f3a1c000000
	fxLibcBias2 = 0x7f1100000000
	fxOperator  = "operator<<(std::ostream&, Foo const&)"
	fxWeird     = "weird;name\nwith newline"
)

func kframe(pc uint64, fn string, off uint64) report.Frame {
	f := report.Frame{PC: pc, Kind: "kernel", Function: fn, Method: "kernel"}
	if fn != "" {
		f.Offset, f.HasOffset = off, true
	}
	return f
}

func uframe(bias, modOff uint64, module, buildID, fn string, off uint64, file string, line int, method string) report.Frame {
	f := report.Frame{PC: bias + modOff, Kind: "user", Function: fn, Module: module,
		ModuleOffset: modOff, HasModule: true, BuildID: buildID, File: file, Line: line, Method: method}
	if fn != "" {
		f.Offset, f.HasOffset = off, true
	}
	return f
}

func inlined(f report.Frame, fn, file string, line int) report.Frame {
	g := f
	g.Function, g.File, g.Line, g.Inlined = fn, file, line, true
	g.Offset, g.HasOffset = 0, false
	return g
}

// Frames shared by stacks, innermost first within each stack.
func fxMain() report.Frame {
	return uframe(fxExeBias, 0x1480, fxExe, fxExeID, "main", 0x30, "/src/myserver/main.c", 51, "cfi")
}
func fxStartMain() report.Frame {
	return uframe(fxLibcBias1, 0x29d90, fxLibc, fxLibcID, "__libc_start_call_main", 0x80, "../sysdeps/nptl/libc_start_call_main.h", 58, "cfi")
}

func fixtureProfile() *Profile {
	hotA := uframe(fxExeBias, 0x1234, fxExe, fxExeID, "hot_a", 0x24, "/src/myserver/hot.c", 30, "cfi")
	hotAInner := inlined(hotA, "hot_a_inner", "/src/myserver/hot.h", 12)
	op := uframe(fxExeBias, 0x1390, fxExe, fxExeID, fxOperator, 0x18, "/src/myserver/fmt.cc", 77, "cfi")
	hotB := uframe(fxExeBias, 0x1300, fxExe, fxExeID, "hot_b", 0x10, "/src/myserver/hot.c", 44, "regs")
	mainB := uframe(fxExeBias, 0x14a0, fxExe, fxExeID, "main", 0x50, "/src/myserver/main.c", 53, "cfi")
	weird := uframe(fxExeBias, 0x1500, fxExe, fxExeID, fxWeird, 0x8, "", 0, "cfi")
	foo := uframe(0x7f3a1d000000, 0x4567, fxLibfoo, fxLibfooID, "", 0, "", 0, "regs")
	foo2 := uframe(0x7f3a1d000000, 0x4a10, fxLibfoo, fxLibfooID, "", 0, "", 0, "fp")
	futex := uframe(fxLibcBias1, 0x91117, fxLibc, fxLibcID, "__futex_abstimed_wait_common", 0x127, "./nptl/futex-internal.c", 57, "regs")

	crunch := uframe(0, 0x401136, fxBatch, fxBatchID, "crunch", 0x16, "/src/batch/crunch.c", 9, "regs")
	bmain := uframe(0, 0x401190, fxBatch, fxBatchID, "main", 0x20, "/src/batch/crunch.c", 20, "fp")
	bstart := uframe(fxLibcBias2, 0x29d90, fxLibc, fxLibcID, "__libc_start_call_main", 0x80, "../sysdeps/nptl/libc_start_call_main.h", 58, "cfi")
	jit := report.Frame{PC: 0x7f0012345678, Kind: "user", Method: "regs"}

	return &Profile{
		Start:     time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Duration:  10 * time.Second,
		FreqHz:    99,
		PerThread: false,
		Processes: []ProfileProcess{
			{PID: 4242, Comm: "myserver", Exe: fxExe},
			{PID: 5151, Comm: "batch;job", Exe: fxBatch},
		},
		Samples: []Sample{
			// 0: hot_a (hot_a_inner inlined) under operator<< and main, in a page fault.
			{PID: 4242, TID: 4243, Thread: "worker-1", Count: 60, Frames: []report.Frame{
				kframe(0xffffffff810f3a21, "clear_page_erms", 0x11),
				kframe(0xffffffff81c0d4e0, "asm_exc_page_fault", 0x26),
				hotAInner, hotA, op, fxMain(), fxStartMain()}},
			// 1: hot_a_inner itself, no kernel.
			{PID: 4242, TID: 4244, Thread: "worker-2", Count: 40, Frames: []report.Frame{
				hotAInner, hotA, op, fxMain(), fxStartMain()}},
			// 2: hot_b from another call site in main.
			{PID: 4242, TID: 4244, Thread: "worker-2", Count: 20, Frames: []report.Frame{
				hotB, mainB, fxStartMain()}},
			// 3: the same stack as 2 in another thread of the same name.
			{PID: 4242, TID: 4245, Thread: "worker-2", Count: 7, Frames: []report.Frame{
				hotB, mainB, fxStartMain()}},
			// 4: a stripped library called from a weirdly named function.
			{PID: 4242, TID: 4243, Thread: "worker-1", Count: 5, Frames: []report.Frame{
				foo, foo2, weird, fxMain(), fxStartMain()}},
			// 5: blocked in futex, kernel frames first.
			{PID: 4242, TID: 4242, Thread: "myserver", Count: 10, Frames: []report.Frame{
				kframe(0xffffffff8110aa10, "futex_wait_queue", 0x21),
				kframe(0xffffffff8110b0c0, "do_futex", 0x40),
				futex, fxMain(), fxStartMain()}},
			// 6: never counted.
			{PID: 4242, TID: 4246, Thread: "idle", Count: 0, Frames: []report.Frame{hotB}},
			// 7: batch: crunch under main.
			{PID: 5151, TID: 5151, Thread: "batch;job", Count: 15, Frames: []report.Frame{
				crunch, bmain, bstart}},
			// 8: batch: JIT code outside any module, called from crunch.
			{PID: 5151, TID: 5152, Thread: "jit<&>", Count: 4, Frames: []report.Frame{
				jit, crunch, bmain, bstart}},
			// 9: batch: a truncated stack of unknown kernel frames.
			{PID: 5151, TID: 5152, Thread: "jit<&>", Count: 3, Frames: []report.Frame{
				kframe(0xffffffff81000123, "", 0), kframe(0, "", 0)}},
		},
		Stats: Stats{
			Ticks: 990, Samples: 164, AchievedHz: 99.0, Threads: 6,
			Truncated: 3, TruncatedWhy: map[string]int64{"no-cfi": 2, "depth": 1},
			PauseMedUS: 12.5, PauseP99US: 40.25, PauseMaxUS: 88,
			NoStop: 100, Stopped: 60, ProcOnly: 4,
		},
	}
}

// fxTotal is the sum of the fixture's counts.
const fxTotal = 60 + 40 + 20 + 7 + 5 + 10 + 15 + 4 + 3
