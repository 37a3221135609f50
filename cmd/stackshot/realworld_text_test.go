//go:build linux

package main

// The text an operator reads, against real servers: the kernel's
// system-call entry glue said once, the command line in the header.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// startRedis starts redis-server in a temporary directory, listening on
// a unix socket only, and returns its pid once every thread has settled.
// It is killed by pid when the test ends.
func startRedis(t *testing.T) int {
	t.Helper()
	bin := testutil.Need(t, "redis-server")
	dir := t.TempDir()
	sock := filepath.Join(dir, "r.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--dir", dir, "--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); cmd.Wait() })
	end := time.Now().Add(30 * time.Second)
	for { // its socket is made once it is ready to serve
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("redis-server (pid %d) made no socket at %s within 30s", pid, sock)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !testutil.WaitSettled(pid, 20*time.Second) {
		t.Fatalf("redis-server (pid %d): its threads did not settle within 20s", pid)
	}
	return pid
}

// procKernelStack reads the kernel's own list of a thread's kernel frames
// (/proc/PID/task/TID/stack), as "function+0xoffset", innermost first.
func procKernelStack(t *testing.T, pid, tid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stack", pid, tid))
	if err != nil {
		t.Fatalf("reading the kernel stack of thread %d: %v", tid, err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		out = append(out, strings.SplitN(f[1], "/", 2)[0])
	}
	return out
}

// kernelMeaning splits a kernel stack (innermost first) at the pt_regs
// boundary: the frames above the first system call wrapper (__x64_sys_*,
// or __do_sys_* where the kernel did not inline it, or do_syscall_64: the
// system call's own code is above it) and the ones at or below it (the
// entry glue).
func kernelMeaning(stack []string) (meaning, glue []string) {
	for i, f := range stack {
		if strings.HasPrefix(f, "__x64_sys_") || strings.HasPrefix(f, "__do_sys_") || strings.HasPrefix(f, "do_syscall_64+") {
			return stack[:i], stack[i:]
		}
	}
	return stack, nil
}

var threadHeader = regexp.MustCompile(`(?m)^Thread (\d+) `)

// threadBlocks splits a text dump into each thread's lines, by TID.
func threadBlocks(text string) map[int]string {
	out := map[int]string{}
	locs := threadHeader.FindAllStringSubmatchIndex(text, -1)
	for i, l := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		var tid int
		fmt.Sscan(text[l[2]:l[3]], &tid)
		out[tid] = text[l[0]:end]
	}
	return out
}

// TestTextRedisKernelGlue dumps a real redis-server: each blocked
// thread's kernel frames above the system call's entry are all there, in
// the kernel's order, and the entry glue below them is not (it is the
// syscall line); -v shows every frame; the whole text stays within 1.2x
// of eu-stack's lines plus what eu-stack cannot show: the kernel frames
// above the entry and one syscall line per thread.
func TestTextRedisKernelGlue(t *testing.T) {
	testutil.Need(t, "eu-stack")
	if os.Geteuid() != 0 {
		testutil.Skip(t, "the kernel shows /proc/PID/task/TID/stack to root only")
	}
	pid := startRedis(t)
	var text, verbose string
	var stacks map[int][]string
	for try := 0; ; try++ { // an idle server's stacks stay; retry if one moved
		before := map[int][]string{}
		for tid := range testutil.ThreadStates(pid) {
			before[tid] = procKernelStack(t, pid, tid)
		}
		out, errOut, code := runSS(t, fmt.Sprint(pid))
		vout, _, vcode := runSS(t, "-v", fmt.Sprint(pid))
		if code != 0 || vcode != 0 {
			t.Fatalf("stackshot %d: exit %d/%d\n%s", pid, code, vcode, errOut)
		}
		same := true
		for tid, st := range before {
			same = same && strings.Join(st, " ") == strings.Join(procKernelStack(t, pid, tid), " ")
		}
		if same || try == 4 {
			text, verbose, stacks = out, vout, before
			break
		}
	}
	blocks, vblocks := threadBlocks(text), threadBlocks(verbose)
	kept := 0
	for tid, stack := range stacks {
		meaning, glue := kernelMeaning(stack)
		if len(glue) == 0 {
			t.Errorf("thread %d: no system call entry in its kernel stack %v (redis's threads block in system calls)", tid, stack)
			continue
		}
		kept += len(meaning)
		block := blocks[tid]
		if !inOrder(block, meaning) {
			t.Errorf("thread %d: want the kernel frames %v in order in\n%s", tid, meaning, block)
		}
		for _, g := range glue {
			if strings.Contains(block, " "+g+" [kernel]") {
				t.Errorf("thread %d: entry glue %s printed without -v:\n%s", tid, g, block)
			}
		}
		if n := strings.Count(block, "\n    --- ") - strings.Count(block, "\n    --- waiting for"); n != 1 {
			t.Errorf("thread %d: want one syscall line, got %d:\n%s", tid, n, block)
		}
		if !inOrder(vblocks[tid], stack) {
			t.Errorf("thread %d: -v: want every kernel frame %v in\n%s", tid, stack, vblocks[tid])
		}
	}
	eu, err := exec.Command("eu-stack", "-p", fmt.Sprint(pid)).Output()
	if err != nil {
		t.Fatalf("eu-stack -p %d: %v", pid, err)
	}
	lines, euLines := strings.Count(text, "\n"), strings.Count(string(eu), "\n")
	t.Logf("redis-server, %d threads: stackshot %d lines (-v %d), eu-stack %d, kernel frames kept %d",
		len(stacks), lines, strings.Count(verbose, "\n"), euLines, kept)
	if base := euLines + kept + len(stacks); lines*10 > base*12 {
		t.Errorf("text of %d lines, more than 1.2x eu-stack's %d plus the %d kernel frames and %d syscall lines it cannot show:\n%s",
			lines, euLines, kept, len(stacks), text)
	}
}

// inOrder reports whether each "function+0xoffset" of frames appears as a
// kernel frame line of block, in order.
func inOrder(block string, frames []string) bool {
	at := 0
	for _, f := range frames {
		i := strings.Index(block[at:], " "+f+" [kernel]\n")
		if i < 0 {
			return false
		}
		at += i + 1
	}
	return true
}

// TestTextDStateKeepsGlue dumps a vfork parent (state D until its child
// execs or exits): a thread in D shows every kernel frame, the entry
// glue included, as the kernel lists them.
func TestTextDStateKeepsGlue(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "the kernel shows /proc/PID/task/TID/stack to root only")
	}
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "vfork.c")}, "-O0", "-g", "-fno-omit-frame-pointer")
	tg := testutil.Start(t, bin, "20000") // the child holds the parent in vfork for 20 s
	stack := procKernelStack(t, tg.PID, tg.PID)
	if _, glue := kernelMeaning(stack); len(glue) == 0 || testutil.State(tg.PID) != "D" {
		t.Fatalf("vfork parent: state %q, kernel stack %v; want D in a system call", testutil.State(tg.PID), stack)
	}
	out, errOut, code := runSS(t, fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if block := threadBlocks(out)[tg.PID]; !strings.Contains(block, "(state D") || !inOrder(block, stack) {
		t.Errorf("thread in D: want every kernel frame %v in order in\n%s", stack, block)
	}
}
