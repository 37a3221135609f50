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

var (
	threadHeader = regexp.MustCompile(`(?m)^(?:Thread (\d+) |\d+ threads with one stack: (.*) \(state )`)
	foldedTID    = regexp.MustCompile(`(?:^|, )(\d+) "`)
)

// threadBlocks splits a text dump into each thread's lines, by TID; the
// threads of a folded block ("3 threads with one stack: 22473 "a",
// 22474 "b" (state …") each get the block.
func threadBlocks(text string) map[int]string {
	out := map[int]string{}
	locs := threadHeader.FindAllStringSubmatchIndex(text, -1)
	for i, l := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if l[2] >= 0 {
			var tid int
			fmt.Sscan(text[l[2]:l[3]], &tid)
			out[tid] = text[l[0]:end]
			continue
		}
		for _, m := range foldedTID.FindAllStringSubmatch(text[l[4]:l[5]], -1) {
			var tid int
			fmt.Sscan(m[1], &tid)
			out[tid] = text[l[0]:end]
		}
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
	var text, verbose, unfolded string
	var stacks map[int][]string
	for try := 0; ; try++ { // an idle server's stacks stay; retry if one moved
		before := map[int][]string{}
		for tid := range testutil.ThreadStates(pid) {
			before[tid] = procKernelStack(t, pid, tid)
		}
		out, errOut, code := runSS(t, fmt.Sprint(pid))
		vout, _, vcode := runSS(t, "-v", fmt.Sprint(pid))
		nout, _, ncode := runSS(t, "--no-group", fmt.Sprint(pid))
		if code != 0 || vcode != 0 || ncode != 0 {
			t.Fatalf("stackshot %d: exit %d/%d/%d\n%s", pid, code, vcode, ncode, errOut)
		}
		same := true
		for tid, st := range before {
			same = same && strings.Join(st, " ") == strings.Join(procKernelStack(t, pid, tid), " ")
		}
		if same || try == 4 {
			text, verbose, stacks, unfolded = out, vout, before, nout
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
		if n := strings.Count(block, "\n    --- ") - strings.Count(block, "\n    --- waiting for"); n != 1 && !strings.Contains(block, "threads with one stack") {
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
	if lines*10 > euLines*12 {
		t.Errorf("text of %d lines (%d kernel frames kept), more than 1.2x eu-stack's %d:\n%s", lines, kept, euLines, text)
	}
	// Folded or not, each thread is named with its own wait.
	names := threadNames(pid)
	for tid := range stacks {
		if !strings.Contains(text, fmt.Sprintf("%d %q", tid, names[tid])) {
			t.Errorf("thread %d %q not named in\n%s", tid, names[tid], text)
		}
	}
	if nb := threadBlocks(unfolded); len(nb) != len(stacks) || strings.Count(unfolded, "\nThread ") != len(stacks) {
		t.Errorf("--no-group: want each of the %d threads on its own:\n%s", len(stacks), unfolded)
	}
	// Debian's redis-server is a symlink to redis-check-rdb: the header
	// says both names.
	if exe := procExe(t, pid); filepath.Base(exe) != "redis-server" {
		want := fmt.Sprintf("Process %d (redis-server) %s, started as redis-server: ", pid, exe)
		if !strings.HasPrefix(text, want) {
			t.Errorf("want the header to start %q:\n%s", want, text)
		}
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
	// A thread in vfork cannot stop: --mode stop reads it from /proc.
	out, errOut, code = runSS(t, "--mode", "stop", fmt.Sprint(tg.PID))
	if want := fmt.Sprintf("Thread %d ", tg.PID); code != 0 || !strings.Contains(out, "(state D, in vfork, would not stop: from /proc):") {
		t.Errorf("--mode stop: exit %d, want %sto say it would not stop, read from /proc:\n%s%s", code, want, out, errOut)
	}
}

// procCmdline reads a process's command line as ps shows it: arguments
// joined by spaces (the test's own reading of /proc, at most max bytes).
func procCmdline(t *testing.T, pid, max int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("reading the command line of %d: %v", pid, err)
	}
	if len(b) > max {
		b = b[:max]
	}
	return strings.TrimSpace(strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
}

// TestTextCommandLineNginx dumps a real nginx master and its worker:
// processes of one server that look alike by name and executable are
// told apart by the command line they show (nginx rewrites its argv).
func TestTextCommandLineNginx(t *testing.T) {
	bin := testutil.Need(t, "nginx")
	dir := t.TempDir()
	port := strings.TrimPrefix(testutil.FreeAddr(t), "127.0.0.1:")
	conf := fmt.Sprintf(`worker_processes 1;
error_log %[1]s/error.log;
pid %[1]s/nginx.pid;
events { worker_connections 16; }
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fcgi;
  uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  server { listen 127.0.0.1:%[2]s; }
}
`, dir, port)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	master := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(master, syscall.SIGKILL); cmd.Wait() })
	worker := 0
	for end := time.Now().Add(30 * time.Second); worker == 0; {
		// The worker is the master's child that has renamed itself.
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", master, master))
		for _, f := range strings.Fields(string(b)) {
			var pid int
			fmt.Sscan(f, &pid)
			if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(c), "nginx: worker process") {
				worker = pid
				t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			}
		}
		if time.Now().After(end) {
			t.Fatalf("nginx (pid %d) started no worker within 30s", master)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !testutil.WaitSettled(master, 20*time.Second) || !testutil.WaitSettled(worker, 20*time.Second) {
		t.Fatalf("nginx's processes did not settle within 20s")
	}
	out, errOut, code := runSS(t, fmt.Sprint(master), fmt.Sprint(worker))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, pid := range []int{master, worker} {
		want := fmt.Sprintf("Process %d (nginx) %s: 1 thread, state S\n  command line: %s\n", pid, procExe(t, pid), procCmdline(t, pid, 4096))
		if !strings.Contains(out, want) {
			t.Errorf("want the header\n%s\nin\n%s", want, out)
		}
	}
	p := dumpJSON(t, fmt.Sprint(worker))
	if want := procCmdline(t, worker, 4096); p.Cmdline != want {
		t.Errorf("JSON cmdline %q, want %q", p.Cmdline, want)
	}
}

func procExe(t *testing.T, pid int) string {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestTextCommandLineHostile starts a program under a name and arguments
// the test chose (exec -a): a terminal escape in its argv[0] and 10 KiB
// of arguments. The header says the name it was started as, escaped; the
// command line is read bounded (4 KiB in JSON) and shown shorter.
func TestTextCommandLineHostile(t *testing.T) {
	sh := testutil.Need(t, "bash")
	long := strings.Repeat("a", 10<<10)
	// bash again, under that name, reading its stdin (kept open) with the
	// long argument as its $0.
	cmd := exec.Command(sh, "-c", `exec -a "$(printf 'evil\033[2Jname')" "$0" -c 'read x' "$1"`, sh, long)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); cmd.Wait() })
	for end := time.Now().Add(20 * time.Second); !strings.HasPrefix(procCmdline(t, pid, 64), "evil"); {
		if time.Now().After(end) {
			t.Fatalf("pid %d did not exec sleep within 20s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	testutil.WaitSettled(pid, 20*time.Second)
	out, errOut, code := runSS(t, fmt.Sprint(pid))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	header, _, _ := strings.Cut(out, "\nVerdict")
	if strings.ContainsRune(out, '\x1b') {
		t.Errorf("a raw escape from the target's argv reached the text:\n%q", header)
	}
	if !strings.Contains(header, `, started as evil\x1b[2Jname: 1 thread`) {
		t.Errorf("want the header to say the (escaped) name it was started as:\n%s", header)
	}
	line := header[strings.Index(header, "  command line: "):]
	if len(line) > 300 || !strings.HasSuffix(strings.TrimSpace(line), "aaa…") {
		t.Errorf("command line shown in %d bytes, want it cut short (about 256) with …:\n%s", len(line), line)
	}
	if p := dumpJSON(t, fmt.Sprint(pid)); p.Cmdline != procCmdline(t, pid, 4096) || len(p.Cmdline) != 4096 {
		t.Errorf("JSON cmdline of %d bytes, want the first 4096 of /proc's", len(p.Cmdline))
	}
}

// TestTextThreadsInPlainWords: -t says how many threads the process has
// besides those shown; -v's capture statistics go to stderr, never into
// the report; thread headers say how a thread was read in words, not the
// JSON's values.
func TestTextThreadsInPlainWords(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags), "spin")
	all := len(testutil.ThreadStates(tg.PID))
	reader := 0
	for tid := range testutil.ThreadStates(tg.PID) {
		if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", tg.PID, tid)); strings.TrimSpace(string(c)) == "reader" {
			reader = tid
		}
	}
	out, errOut, code := runSS(t, "-v", "-t", fmt.Sprint(reader), fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := fmt.Sprintf(": 1 of %d threads, state ", all); !strings.Contains(out, want) {
		t.Errorf("-t: want %q in the header:\n%s", want, out)
	}
	if want := fmt.Sprintf(`Thread %d "reader" (state S, in read, read without stopping):`, reader); !strings.Contains(out, want) {
		t.Errorf("want the header %q:\n%s", want, out)
	}
	if strings.Contains(strings.ToLower(out), "capture of") {
		t.Errorf("-v: the capture's statistics are inside the report on stdout:\n%s", out)
	}
	if want := fmt.Sprintf("stackshot: process %d: the capture of 1 thread took ", tg.PID); !strings.Contains(errOut, want) {
		t.Errorf("-v: want %q on stderr:\n%s", want, errOut)
	}
	out, errOut, code = runSS(t, "-v", "--mode", "stop", fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`"spinner" \(state R, running, stopped for \d+\.\dus\):`).MatchString(out) {
		t.Errorf("--mode stop -v: want the spinner's header to say it was stopped, and for how long:\n%s", out)
	}
	if !strings.Contains(errOut, "each stopped thread's pause: median ") {
		t.Errorf("--mode stop -v: want the pauses on stderr:\n%s", errOut)
	}
	for _, internal := range []string{"nostop)", "ptrace)", "proc-only)", ", paused "} {
		if strings.Contains(out, internal) {
			t.Errorf("a header says %q (the JSON's word):\n%s", internal, out)
		}
	}
}

// TestErrorNotDumpable runs stackshot as an ordinary user against that
// user's own process that made itself not dumpable: the error says so,
// and what works (root, CAP_SYS_PTRACE), not "run as the process owner".
func TestErrorNotDumpable(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: setpriv runs the target and stackshot as another user")
	}
	setpriv := testutil.Need(t, "setpriv")
	const uid = "1000" // a service account, neither root nor nobody
	asUser := []string{"--reuid", uid, "--regid", uid, "--clear-groups", "--"}
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "undumpable.c")}, "-O0", "-g")
	tg := testutil.Start(t, setpriv, append(asUser, bin)...)
	if tg.Ready != "ready dumpable=0" {
		t.Fatalf("the target says %q, want it not dumpable", tg.Ready)
	}
	// A copy of stackshot that the user may run.
	dir, err := os.MkdirTemp("", "stackshot-user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ss := filepath.Join(dir, "stackshot")
	b, err := os.ReadFile(stackshotBin)
	if err == nil {
		err = os.WriteFile(ss, b, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, append(asUser, ss, "--no-cache", fmt.Sprint(tg.PID))...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("stackshot as uid %s: %v, want exit 1\n%s%s", uid, err, so.String(), se.String())
	}
	msg := se.String()
	for _, want := range []string{fmt.Sprintf("stackshot: cannot read process %d (", tg.PID), "it is not dumpable", "run stackshot as root or with CAP_SYS_PTRACE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("want %q in the error:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "process owner") || strings.Count(strings.TrimSpace(msg), "\n") > 0 {
		t.Errorf("want one line that does not send the owner to be the owner:\n%s", msg)
	}
}
