//go:build linux

package unwind

// A tiny test-only capture path (ptrace on one locked OS thread,
// process_vm_readv, /proc/PID/maps) and a debug/elf symbolizer, so that the
// walker is checked on real stacks without depending on the ptrace package.

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// target is a running test program.
type target struct {
	pid    int
	cmd    *exec.Cmd
	stdout *bufio.Reader
}

// startTarget runs bin with args and waits for it to print "ready".
func startTarget(t *testing.T, bin string, args ...string) *target {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tg := &target{pid: cmd.Process.Pid, cmd: cmd, stdout: bufio.NewReader(out)}
	t.Cleanup(func() {
		_ = unix.Kill(tg.pid, unix.SIGKILL) // by pid: only the process this test started
		_ = cmd.Wait()
	})
	tg.expectLine(t, "ready")
	return tg
}

func (tg *target) expectLine(t *testing.T, want string) {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		line, _ := tg.stdout.ReadString('\n')
		done <- strings.TrimSpace(line)
	}()
	select {
	case got := <-done:
		if got != want {
			t.Fatalf("target printed %q, want %q", got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("target did not print %q", want)
	}
}

// threads lists the target's thread ids, main thread first.
func (tg *target) threads(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", tg.pid))
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, n)
		}
	}
	sort.Ints(tids)
	return tids
}

// waitSyscall waits until thread tid is blocked in syscall nr.
func waitSyscall(t *testing.T, pid, tid, nr int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
		if err == nil {
			f := strings.Fields(string(b))
			if len(f) > 0 && f[0] == strconv.Itoa(nr) {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("thread %d never blocked in syscall %d", tid, nr)
}

// capture is one thread's registers and stack.
type capture struct {
	regs   Regs
	stack  Stack
	lo, hi uint64
}

var ptraceMu sync.Mutex

// captureThread stops tid with PTRACE_SEIZE+PTRACE_INTERRUPT, reads its
// registers and the stack from SP to the end of its mapping, and detaches,
// all from one locked OS thread.
func captureThread(t testing.TB, pid, tid int, sp *space) capture {
	t.Helper()
	ptraceMu.Lock()
	defer ptraceMu.Unlock()
	type result struct {
		c   capture
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the thread
		var c capture
		err := func() error {
			if err := unix.PtraceSeize(tid); err != nil {
				return fmt.Errorf("seize %d: %w", tid, err)
			}
			defer unix.PtraceDetach(tid)
			if err := unix.PtraceInterrupt(tid); err != nil {
				return fmt.Errorf("interrupt: %w", err)
			}
			var ws unix.WaitStatus
			if _, err := unix.Wait4(tid, &ws, unix.WALL, nil); err != nil {
				return fmt.Errorf("wait4: %w", err)
			}
			var pr unix.PtraceRegs
			if err := unix.PtraceGetRegs(tid, &pr); err != nil {
				return fmt.Errorf("getregs: %w", err)
			}
			u := (*[UserRegsCount]uint64)(unsafe.Pointer(&pr))
			c.regs = RegsFromUser(u[:])
			rsp := c.regs.V[RegRSP]
			m, ok := sp.find(rsp)
			if !ok {
				return fmt.Errorf("sp %#x in no mapping", rsp)
			}
			c.lo, c.hi = m.start, m.end
			n := m.end - rsp
			if n > 4<<20 {
				n = 4 << 20
			}
			c.stack = Stack{Addr: rsp, Data: make([]byte, n)}
			got, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &c.stack.Data[0], Len: n}},
				[]unix.RemoteIovec{{Base: uintptr(rsp), Len: int(n)}}, 0)
			if err != nil {
				return fmt.Errorf("process_vm_readv: %w", err)
			}
			c.stack.Data = c.stack.Data[:got]
			return nil
		}()
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("capture %d/%d: %v", pid, tid, r.err)
	}
	return r.c
}

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end, off uint64
	perms, path     string
}

// module is a loaded ELF with its table and symbols.
type module struct {
	tab  *Table
	syms []elf.Symbol // functions, sorted by value
	f    *elf.File
}

// space is a Space over a live process for tests.
type space struct {
	pid   int
	maps  []mapping
	mods  map[string]*module
	cache map[uint64]ModuleInfo // by mapping start
}

func readMaps(t testing.TB, pid int) []mapping {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var ms []mapping
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		var m mapping
		m.start, _ = strconv.ParseUint(lo, 16, 64)
		m.end, _ = strconv.ParseUint(hi, 16, 64)
		m.off, _ = strconv.ParseUint(f[2], 16, 64)
		m.perms = f[1]
		if len(f) >= 6 {
			m.path = f[5]
		}
		ms = append(ms, m)
	}
	return ms
}

func newSpace(t testing.TB, pid int) *space {
	return &space{pid: pid, maps: readMaps(t, pid), mods: map[string]*module{}, cache: map[uint64]ModuleInfo{}}
}

func (s *space) find(addr uint64) (mapping, bool) {
	i := sort.Search(len(s.maps), func(i int) bool { return s.maps[i].end > addr })
	if i < len(s.maps) && s.maps[i].start <= addr {
		return s.maps[i], true
	}
	return mapping{}, false
}

// debugFileFor returns the separate debug file of f, by build id.
func debugFileFor(f *elf.File) string {
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		return ""
	}
	id := hex.EncodeToString(b[16:])
	if len(id) < 3 {
		return ""
	}
	p := filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// loadModule loads the table and symbols of a file or of the vdso image.
func (s *space) loadModule(m mapping) *module {
	key := m.path
	if mod, ok := s.mods[key]; ok {
		return mod
	}
	mod := &module{}
	s.mods[key] = mod
	var r io.ReaderAt
	if m.path == "[vdso]" {
		img := make([]byte, m.end-m.start)
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", s.pid))
		if err != nil {
			return mod
		}
		defer f.Close()
		if _, err := f.ReadAt(img, int64(m.start)); err != nil {
			return mod
		}
		r = bytes.NewReader(img)
	} else if strings.HasPrefix(m.path, "/") {
		b, err := os.ReadFile(m.path)
		if err != nil {
			return mod
		}
		r = bytes.NewReader(b)
	} else {
		return mod
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return mod
	}
	mod.f = f
	var dbg io.ReaderAt
	var df *elf.File
	if p := debugFileFor(f); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			dbg = bytes.NewReader(b)
			df, _ = elf.NewFile(dbg.(*bytes.Reader))
		}
	}
	mod.tab, _ = LoadTable(r, dbg)
	for _, ef := range []*elf.File{f, df} {
		if ef == nil {
			continue
		}
		syms, _ := ef.Symbols()
		dyn, _ := ef.DynamicSymbols()
		for _, sy := range append(syms, dyn...) {
			if elf.ST_TYPE(sy.Info) == elf.STT_FUNC && sy.Value != 0 {
				mod.syms = append(mod.syms, sy)
			}
		}
	}
	sort.SliceStable(mod.syms, func(i, j int) bool { return mod.syms[i].Value < mod.syms[j].Value })
	return mod
}

// bias computes runtime - vaddr for the mapping m of f.
func bias(f *elf.File, m mapping) uint64 {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Off <= m.off && m.off < p.Off+p.Filesz {
			return m.start + p.Off - p.Vaddr - m.off
		}
	}
	return m.start - m.off
}

func (s *space) Lookup(addr uint64) (ModuleInfo, bool) {
	m, ok := s.find(addr)
	if !ok {
		return ModuleInfo{}, false
	}
	if mi, ok := s.cache[m.start]; ok {
		return mi, true
	}
	mi := ModuleInfo{Start: m.start, End: m.end, Exec: strings.Contains(m.perms, "x")}
	if mi.Exec {
		if mod := s.loadModule(m); mod.f != nil {
			mi.CFI = mod.tab
			mi.Bias = bias(mod.f, m)
		}
	}
	s.cache[m.start] = mi
	return mi, true
}

func (s *space) ReadCode(p []byte, addr uint64) (int, error) {
	return unix.ProcessVMReadv(s.pid, []unix.Iovec{{Base: &p[0], Len: uint64(len(p))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}, 0)
}

// ReadMemory makes the live space a Memory.
func (s *space) ReadMemory(p []byte, addr uint64) (int, error) { return s.ReadCode(p, addr) }

// symbolize names the function containing each frame's PC (PC-1 for
// return addresses); "?" if unknown.
func (s *space) symbolize(frames []Frame) []string {
	var names []string
	for _, f := range frames {
		pc := f.PC
		if !f.Exact && !f.SignalFrame { // the trampoline's PC is its first instruction
			pc--
		}
		names = append(names, s.symbol(pc))
	}
	return names
}

func (s *space) symbol(pc uint64) string {
	m, ok := s.find(pc)
	if !ok {
		return "?"
	}
	mod := s.loadModule(m)
	if mod.f == nil {
		return "?"
	}
	v := pc - bias(mod.f, m)
	i := sort.Search(len(mod.syms), func(i int) bool { return mod.syms[i].Value > v }) - 1
	// Prefer a symbol whose size covers v (aliases share a value); else an
	// assembler symbol of size 0 right before v.
	for j := i; j >= 0 && j > i-64; j-- {
		if sy := mod.syms[j]; v < sy.Value+sy.Size {
			return sy.Name
		}
	}
	if i >= 0 && mod.syms[i].Size == 0 && v-mod.syms[i].Value < 64 {
		return mod.syms[i].Name
	}
	return "?"
}

// unwindThread captures and unwinds one thread.
func unwindThread(t testing.TB, pid, tid int, s *space, maxFrames int) ([]Frame, StopReason) {
	t.Helper()
	c := captureThread(t, pid, tid, s)
	in := &Input{Regs: c.regs, Stack: c.stack, StackLo: c.lo, StackHi: c.hi, Space: s, Mem: s, MaxFrames: maxFrames}
	return Unwind(in, nil)
}

// matchChain checks names against patterns (globs whose * matches anything, alternatives
// separated by '|'), each pattern matching one frame, in order.
func matchChain(names []string, patterns []string) bool {
	if len(names) != len(patterns) {
		return false
	}
	for i, p := range patterns {
		ok := false
		for _, alt := range strings.Split(p, "|") {
			re := "^" + strings.ReplaceAll(regexp.QuoteMeta(alt), `\*`, ".*") + "$"
			if m, _ := regexp.MatchString(re, names[i]); m {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func describe(frames []Frame, names []string) string {
	var sb strings.Builder
	for i, f := range frames {
		fmt.Fprintf(&sb, "  #%-3d %#x sp=%#x %-12s %s", i, f.PC, f.SP, f.Method, names[i])
		if f.SignalFrame {
			sb.WriteString(" <signal handler called>")
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}
