//go:build linux

package main

// ELF cores: `capture -o FILE.core` of C, C++, Rust and Go targets, the
// target killed, then stackshot's own `report` of the core compared with
// two independent readers of the same file: gdb (`thread apply all bt`)
// and elfutils' eu-stack.

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
)

// ssFrame is one physical user frame of stackshot's report, with the
// names of every logical frame at its PC (inlined ones first).
type ssFrame struct {
	pc     uint64
	names  []string
	module string
}

func physFrames(th jThread) []ssFrame {
	var out []ssFrame
	var inl []string
	for _, f := range th.Frames {
		if f.Kind != "user" {
			continue
		}
		inl = append(inl, f.Fn())
		if f.Inlined {
			continue
		}
		pc, _ := strconv.ParseUint(strings.TrimPrefix(f.PC, "0x"), 16, 64)
		out = append(out, ssFrame{pc, inl, f.Module})
		inl = nil
	}
	return out
}

func (f ssFrame) String() string { return fmt.Sprintf("%#x %s", f.pc, strings.Join(f.names, "/")) }

func reportCore(t testing.TB, args ...string) jProc {
	t.Helper()
	out, errOut, code := runSS(t, append([]string{"report", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("report %v: exit %d: %s", args, code, errOut)
	}
	var p jProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("report JSON: %v\n%.300s", err, out)
	}
	return p
}

// captureCore captures pid into a core (extra capture flags appended),
// checks the file's mode, and kills the target.
func captureCore(t testing.TB, tg *testutil.Target, flags ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "t.core")
	args := append([]string{"capture", strconv.Itoa(tg.PID), "-o", file}, flags...)
	if _, errOut, code := runSS(t, args...); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errOut)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("core mode %v, want 0600 (it holds stack memory)", st.Mode().Perm())
	}
	tg.Stop()
	return file
}

// toolFrame is one frame of gdb's or eu-stack's backtrace: pc 0 when the
// tool printed no address (gdb's frame 0 at a line start, inlined frames).
type toolFrame struct {
	pc   uint64
	name string
}

var (
	gdbThread = regexp.MustCompile(`^Thread \d+ \(.*LWP (\d+)\)`)
	gdbFrame  = regexp.MustCompile(`^#(\d+)\s+(?:0x([0-9a-f]+) in )?(.+?) \(`)
	euThread  = regexp.MustCompile(`^TID (\d+):`)
	euFrame2  = regexp.MustCompile(`^#\d+\s+0x([0-9a-f]+)\s*(\S*)`)
)

func parseBacktraces(out []byte, thread, frame *regexp.Regexp, pcGroup, nameGroup int) map[int][]toolFrame {
	res := map[int][]toolFrame{}
	tid := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if m := thread.FindStringSubmatch(l); m != nil {
			tid, _ = strconv.Atoi(m[1])
			continue
		}
		if m := frame.FindStringSubmatch(l); m != nil && tid != 0 {
			pc, _ := strconv.ParseUint(m[pcGroup], 16, 64)
			res[tid] = append(res[tid], toolFrame{pc, m[nameGroup]})
		}
	}
	return res
}

func gdbBacktraces(t testing.TB, exe, core string) map[int][]toolFrame {
	t.Helper()
	out, err := exec.Command("gdb", "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt", exe, core).CombinedOutput()
	res := parseBacktraces(out, gdbThread, gdbFrame, 2, 3)
	if len(res) == 0 {
		t.Fatalf("gdb showed no threads: %v\n%s", err, out)
	}
	return res
}

func euStackBacktraces(t testing.TB, exe, core string) map[int][]toolFrame {
	t.Helper()
	out, err := exec.Command("eu-stack", "--core", core, "-e", exe).CombinedOutput()
	res := parseBacktraces(out, euThread, euFrame2, 1, 2)
	if len(res) == 0 {
		t.Fatalf("eu-stack showed no threads: %v\n%s", err, out)
	}
	return res
}

// checkGdbLibraries: gdb lists the shared libraries of a dynamically
// linked target from the core alone (the dynamic linker's r_debug list,
// found through DT_DEBUG, is in the core even with stacks only), with
// their symbols read.
func checkGdbLibraries(t *testing.T, exe, core string) {
	t.Helper()
	if f, err := elf.Open(exe); err == nil {
		dyn := f.Section(".dynamic") != nil
		f.Close()
		if !dyn {
			return // static (Go): no libraries
		}
	}
	out, _ := exec.Command("gdb", "-batch", "-nx", "-ex", "info sharedlibrary", exe, core).CombinedOutput()
	if !regexp.MustCompile(`(?m)^0x[0-9a-f]+\s+0x[0-9a-f]+\s+Yes.*/libc\.so\.6$`).Match(out) {
		t.Errorf("gdb does not list libc with its symbols read:\n%s", out)
	}
}

// gdbStops names the frames where gdb's backtrace ends by default
// (backtrace past-main off).
var gdbStops = map[string]bool{"main": true, "main.main": true, "runtime.main": true}

// compareWithTool requires the tool's frames with an address to be
// stackshot's physical frames, in order (gdb's frame 0 may carry no
// address), named alike, and, when strict, the tool to get as far as
// stackshot (or to main, where gdb stops; frames past ours that the tool
// cannot name are its own walk off the stack's end). Not strict, the tool
// may stop earlier: threads read without a stop lack the callee-saved
// registers, which gdb and eu-stack need where stackshot's unwinder finds
// frames by validated frame records.
func compareWithTool(t *testing.T, tool string, p jProc, bt map[int][]toolFrame, gdb, strict bool) {
	t.Helper()
	byTID := map[int]jThread{}
	for _, th := range p.Threads {
		byTID[th.TID] = th
	}
	if len(bt) != len(p.Threads) {
		t.Errorf("%s shows %d threads, stackshot %d", tool, len(bt), len(p.Threads))
	}
	for tid, frames := range bt {
		th, ok := byTID[tid]
		if !ok {
			t.Errorf("%s: thread %d not in stackshot's report", tool, tid)
			continue
		}
		ss := physFrames(th)
		// gdb prints inlined frames (and frame 0 at a line start) without
		// an address; past the stack's end both tools print unnamed ones.
		var kept []toolFrame
		for _, f := range frames {
			if f.pc != 0 {
				kept = append(kept, f)
			}
		}
		off := 0
		if gdb && len(frames) > 0 && frames[0].pc == 0 {
			off = 1
		}
		for len(kept)+off > len(ss) && (kept[len(kept)-1].name == "??" || kept[len(kept)-1].name == "") {
			kept = kept[:len(kept)-1]
		}
		if gdb {
			kept = dropTailCallFrames(t, tid, kept, ss)
		}
		// Past a stack's root (or a Go stack switch) the tools walk on
		// into whatever the next words are; stackshot stops there.
		if n := len(ss); n > 0 && len(kept)+off > n && anyRoot(ss[n-1].names) {
			kept = kept[:n-off]
		}
		bad := -1
		if len(kept)+off > len(ss) || len(ss) == 0 {
			bad = len(ss)
		}
		for i := 0; bad < 0 && i < len(kept); i++ {
			s := ss[i+off]
			if kept[i].pc != s.pc || !namesAgree(kept[i].name, s.names) {
				bad = i + off
			}
		}
		if off == 1 && bad < 0 && !namesAgree(frames[0].name, ss[0].names) {
			bad = 0
		}
		reached := len(kept) + off
		if bad >= 0 {
			t.Errorf("%s: thread %d %q differs at our frame %d:\n tool %v\n ours %v", tool, tid, th.Name, bad, frames, ss)
		} else if strict && reached < len(ss) && !(gdb && reached > 0 && anyStop(ss[reached-1].names)) {
			t.Errorf("%s: thread %d %q: the tool stops after %d frames, stackshot has %d:\n tool %v\n ours %v",
				tool, tid, th.Name, reached, len(ss), frames, ss)
		}
	}
}

// dropTailCallFrames removes gdb's "tail call frames": frames gdb infers
// from DWARF call-site records for a function that jumped to its callee.
// They are on no stack (eu-stack and stackshot agree): a frame whose PC is
// none of ours, followed by one that is.
func dropTailCallFrames(t *testing.T, tid int, kept []toolFrame, ss []ssFrame) []toolFrame {
	ours := map[uint64]bool{}
	for _, f := range ss {
		ours[f.pc] = true
	}
	var out []toolFrame
	for i, f := range kept {
		if !ours[f.pc] && i+1 < len(kept) && ours[kept[i+1].pc] && (i == 0 || ours[kept[i-1].pc]) {
			t.Logf("gdb: thread %d: tail call frame %#x %s (not on the stack)", tid, f.pc, f.name)
			continue
		}
		out = append(out, f)
	}
	return out
}

var stackRoots = map[string]bool{"runtime.mcall": true, "runtime.morestack": true, "runtime.systemstack": true,
	"runtime.goexit": true, "runtime.mstart": true, "runtime.clone": true, "runtime.rt0_go": true,
	"clone": true, "clone3": true, "__clone": true, "__clone3": true, "_start": true}

func anyRoot(names []string) bool {
	for _, n := range names {
		if stackRoots[strings.TrimSuffix(n, ".abi0")] {
			return true
		}
	}
	return false
}

func anyStop(names []string) bool {
	for _, n := range names {
		if gdbStops[n] {
			return true
		}
	}
	return false
}

// namesAgree compares a tool's function name with the names stackshot
// gives the frame (any of its logical frames, inlined ones first, as gdb
// names a frame by its innermost inlined function). Each tool spells
// names its own way: gdb drops C++ parameter lists and writes Rust impls
// as {impl#N} and closures as {closure#N}; eu-stack prints symbol
// versions, Go's ".abi0", Rust's legacy symbols with their hash and v0
// symbols mangled. Names are compared as paths without template
// arguments, by their last component where the paths differ in form.
func namesAgree(tool string, ours []string) bool {
	t := normName(tool)
	if strings.HasPrefix(tool, "_R") || strings.HasPrefix(tool, "_Z") {
		return true // mangled: eu-stack does not demangle these
	}
	for _, o := range ours {
		if o == "?" {
			if t == "" || t == "??" {
				return true
			}
			continue
		}
		n := normName(o)
		// (libc's internal aliases: __GI___libc_read for read.)
		if n == t || strings.HasPrefix(n, t) || strings.HasSuffix(n, t) || lastComponent(n) == lastComponent(t) {
			return true
		}
	}
	return false
}

var (
	rustHashSuffix = regexp.MustCompile(`::h[0-9a-f]{16}$`)
	gdbClosure     = regexp.MustCompile(`\{closure#\d+\}`)
	legacyRustE    = strings.NewReplacer("$LT$", "<", "$GT$", ">", "$u7b$", "{", "$u7d$", "}", "$u20$", " ",
		"$RF$", "&", "$C$", ",", "$BP$", "*", "..", "::")
)

func normName(n string) string {
	n = strings.TrimSpace(n)
	if i := strings.IndexByte(n, '@'); i > 0 {
		n = n[:i]
	}
	n = strings.TrimSuffix(n, ".abi0")
	n = rustHashSuffix.ReplaceAllString(n, "")
	if strings.Contains(n, "$") {
		n = legacyRustE.Replace(strings.ReplaceAll(strings.TrimPrefix(n, "_"), "::_$", "::$"))
	}
	n = gdbClosure.ReplaceAllString(n, "{{closure}}")
	// Drop template arguments (an unclosed list, cut by gdb's " (", ends
	// the name), then a C++ parameter list.
	var b strings.Builder
	depth := 0
	for _, r := range n {
		switch {
		case r == '<':
			depth++
		case r == '>' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	n = b.String()
	if i := strings.Index(n, "("); i > 0 && strings.Contains(n, "::") {
		n = n[:i]
	}
	return strings.TrimSpace(n)
}

func lastComponent(n string) string {
	if i := strings.LastIndex(n, "::"); i >= 0 {
		return n[i+2:]
	}
	return n
}

func TestCoreRoundTrip(t *testing.T) {
	testutil.Need(t, "gdb")
	cases := []struct {
		name  string
		build func(t *testing.T) string
		args  []string
		check func(t *testing.T, p jProc)
	}{
		{"c", func(t *testing.T) string { return buildBlocked(t, blockedVariants[1].flags) }, nil, func(t *testing.T, p jProc) {
			assertThreadChain(t, threadByName(t, p, "reader"), "reader_c", "reader_b", "reader_a", "start")
			assertMainChain(t, p.Threads[0], "main_wait", "main")
		}},
		{"cxx", func(t *testing.T) string {
			return testutil.Build(t, "g++", []string{realSrc("cxx.cc")}, "-O2", "-g", "-pthread")
		}, nil, func(t *testing.T, p jProc) {
			assertThreadChain(t, threadByName(t, p, "catcher"), "app::Box<long>::wait(int)", "app::in_catch(int)")
		}},
		{"rust", func(t *testing.T) string {
			testutil.Need(t, "rustc")
			return testutil.Build(t, "rustc", []string{realSrc("threads.rs")}, "-O", "-g")
		}, nil, func(t *testing.T, p jProc) {
			mustThreadWith(t, p, "threads::main_wait")
		}},
		{"go", func(t *testing.T) string { return buildGoTarget(t, "gotarget") }, nil, func(t *testing.T, p jProc) {
			m := mustThreadWith(t, p, "main.stdinB")
			if f := fnames(m); !hasChain(f, []string{"main.stdinB", "main.stdinA", "main.main", "runtime.main", "runtime.goexit"}) {
				t.Errorf("main goroutine: %v", f)
			}
		}},
	}
	for _, c := range cases {
		for _, mode := range []string{"stop", "auto"} {
			t.Run(c.name+"-"+mode, func(t *testing.T) { coreRoundTrip(t, c.build(t), c.args, mode, c.check) })
		}
	}
}

// coreRoundTrip captures a target into a core (every thread stopped, or
// as auto mode reads them), kills it, and compares the core's report with
// gdb's and eu-stack's backtraces of the same file.
func coreRoundTrip(t *testing.T, exe string, args []string, mode string, check func(t *testing.T, p jProc)) {
	c := struct {
		args  []string
		mode  string
		check func(t *testing.T, p jProc)
	}{args, mode, check}
	{
		{
			tg := testutil.Start(t, exe, c.args...)
			core := captureCore(t, tg, "--mode", c.mode)
			p := reportCore(t, core)
			if p.PID != tg.PID || len(p.Threads) == 0 {
				t.Fatalf("report of the core: pid %d, %d threads", p.PID, len(p.Threads))
			}
			c.check(t, p)
			for _, th := range p.Threads {
				if kernelFrames(th) == 0 && th.Syscall != nil {
					t.Errorf("thread %d %q: no kernel frames in the core's report (captured with them)", th.TID, th.Name)
				}
			}
			if c.mode == "stop" {
				checkGdbLibraries(t, exe, core)
			}
			compareWithTool(t, "gdb", p, gdbBacktraces(t, exe, core), true, c.mode == "stop")
			if _, err := exec.LookPath("eu-stack"); err != nil {
				testutil.Skip(t, "eu-stack (elfutils) is not installed on this machine: gdb compared only")
			}
			compareWithTool(t, "eu-stack", p, euStackBacktraces(t, exe, core), false, c.mode == "stop")
		}
	}
}

// TestCorePrpsinfo: the core's NT_PRPSINFO says who the process was as
// the kernel's own cores do: its parent, its owner and its command line
// (not the executable's path), read from /proc while it ran; its threads'
// NT_PRSTATUS carry the parent too.
func TestCorePrpsinfo(t *testing.T) {
	bin := buildBlocked(t, blockedVariants[1].flags)
	tg := testutil.Start(t, bin, "spin")
	st, err := procmaps.ReadStatus(tg.PID)
	if err != nil {
		t.Fatal(err)
	}
	file := captureCore(t, tg)
	f, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var info, status []byte // NT_PRPSINFO, the first NT_PRSTATUS
	for _, ph := range f.Progs {
		if ph.Type != elf.PT_NOTE {
			continue
		}
		b, _ := io.ReadAll(ph.Open())
		for len(b) >= 12 {
			nsz, dsz, typ := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
			name := (12 + int(nsz) + 3) &^ 3
			end := name + (int(dsz)+3)&^3
			if end > len(b) {
				break
			}
			if typ == 3 && string(b[12:12+nsz]) == "CORE\x00" {
				info = b[name : name+int(dsz)]
			}
			if typ == 1 && status == nil {
				status = b[name : name+int(dsz)]
			}
			b = b[end:]
		}
	}
	if len(info) != 136 {
		t.Fatalf("NT_PRPSINFO of %d bytes, want 136", len(info))
	}
	le := binary.LittleEndian
	uid, gid, ppid := le.Uint32(info[16:]), le.Uint32(info[20:]), le.Uint32(info[28:])
	psargs := string(bytes.TrimRight(info[56:136], "\x00"))
	if int(uid) != st.UIDs[0] || int(gid) != st.GIDs[0] || int(ppid) != os.Getpid() || psargs != bin+" spin" {
		t.Errorf("prpsinfo uid %d gid %d ppid %d psargs %q; want %d %d %d %q", uid, gid, ppid, psargs,
			st.UIDs[0], st.GIDs[0], os.Getpid(), bin+" spin")
	}
	if len(status) < 44 || int(le.Uint32(status[36:])) != os.Getpid() {
		t.Errorf("NT_PRSTATUS (%d bytes) does not carry the parent %d", len(status), os.Getpid())
	}
}
