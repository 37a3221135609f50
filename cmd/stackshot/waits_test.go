//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// The JSON of what a blocked thread waits on and how it progresses.
type (
	wFD struct {
		Num          int
		Kind, Target string
	}
	wThread struct {
		TID          int
		Name         string
		FD           *wFD      `json:"fd"`
		WatchedFDs   []wFD     `json:"watched_fds"`
		WatchedCount *int      `json:"watched_count"`
		Progress     string    `json:"progress"`
		CPUShare     *float64  `json:"cpu_share"`
		CPUShares    []float64 `json:"cpu_shares"`
		WakesEveryMS *float64  `json:"wakes_every_ms"`
		WaitingFor   *struct {
			OwnerTID   *int `json:"owner_tid"`
			OwnerState *struct {
				State, Syscall string
				FD             *wFD `json:"fd"`
			} `json:"owner_state"`
		} `json:"waiting_for"`
	}
	wProc struct {
		Verdict         string
		Threads         []wThread
		ProgressSummary *struct{ Stuck, Spinning, Waiting, Moving int } `json:"progress_summary"`
	}
)

func waitsJSON(t *testing.T, args ...string) (wProc, map[string]wThread) {
	t.Helper()
	out, errOut, code := runSS(t, append([]string{"dump", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("stackshot %v: exit %d\n%s", args, code, errOut)
	}
	var p wProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	byName := map[string]wThread{}
	for _, th := range p.Threads {
		byName[th.Name] = th
	}
	return p, byName
}

func buildWaits(t *testing.T) string {
	return testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "waits.c")}, "-O2", "-g", "-pthread")
}

// fdLink is what the kernel says descriptor fd of pid is (readlink).
func fdLink(t *testing.T, pid int, fd string) string {
	t.Helper()
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ssHas reports whether `ss -tanp` lists a socket of pid's descriptor fd
// in state with these local and peer ends.
func ssHas(t *testing.T, pid int, fd, state, local, peer string) bool {
	t.Helper()
	out, err := exec.Command(testutil.Need(t, "ss"), "-tanpH").Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[0] == state && f[3] == local && f[4] == peer &&
			strings.Contains(l, fmt.Sprintf("pid=%d,fd=%s)", pid, fd)) {
			return true
		}
	}
	t.Logf("ss -tanp:\n%s", out)
	return false
}

// Threads blocked in read on a pipe, accept, recv on a loopback TCP
// connection, epoll_wait, poll and select: each says what its descriptors
// are, as readlink, ss and the program itself (getsockname, getpeername)
// say.
func TestFDsNamed(t *testing.T) {
	tg := testutil.Start(t, buildWaits(t), "fds")
	v := readyVals(t, tg.Ready)
	_, th := waitsJSON(t, strconv.Itoa(tg.PID))
	want := func(name string, got *wFD, fd, kind, target string) {
		t.Helper()
		if w := (wFD{Num: atoi(t, v[fd]), Kind: kind, Target: target}); got == nil || *got != w {
			t.Errorf("%s: fd %+v, want %+v", name, got, w)
		}
	}
	pipe := fdLink(t, tg.PID, v["pipefd"])
	want("piper", th["piper"].FD, "pipefd", "pipe", pipe)
	lport, cport, sport := "127.0.0.1:"+v["lport"], "127.0.0.1:"+v["cport"], "127.0.0.1:"+v["sport"]
	want("acceptor", th["acceptor"].FD, "lfd", "socket", "tcp "+lport+" (listening)")
	if !ssHas(t, tg.PID, v["lfd"], "LISTEN", lport, "0.0.0.0:*") {
		t.Errorf("ss does not list fd %s as listening on %s", v["lfd"], lport)
	}
	want("client", th["client"].FD, "cfd", "socket", "tcp "+cport+" -> "+sport)
	if !ssHas(t, tg.PID, v["cfd"], "ESTAB", cport, sport) {
		t.Errorf("ss does not list fd %s as %s -> %s", v["cfd"], cport, sport)
	}
	want("looper", th["looper"].FD, "epfd", "epoll", "anon_inode:[eventpoll]")
	watched := func(name string, n int, fds ...string) {
		t.Helper()
		tw := th[name]
		var got, exp []string
		for _, f := range tw.WatchedFDs {
			got = append(got, fmt.Sprintf("%d %s %s", f.Num, f.Kind, f.Target))
		}
		for i := 0; i < len(fds); i += 3 {
			exp = append(exp, v[fds[i]]+" "+fds[i+1]+" "+fds[i+2])
		}
		sort.Strings(got)
		sort.Strings(exp)
		if fmt.Sprint(got) != fmt.Sprint(exp) || tw.WatchedCount == nil || *tw.WatchedCount != n {
			t.Errorf("%s watches %q (count %v), want %q (%d)", name, got, tw.WatchedCount, exp, n)
		}
	}
	watched("looper", 4, "pipefd", "pipe", pipe, "evfd", "eventfd", "anon_inode:[eventfd]",
		"tfd", "timerfd", "anon_inode:[timerfd]", "lfd", "socket", "tcp "+lport+" (listening)")
	poll := fdLink(t, tg.PID, v["pollfd"])
	watched("poller", 2, "pollfd", "pipe", poll, "evfd", "eventfd", "anon_inode:[eventfd]")
	watched("selector", 1, "pollfd", "pipe", poll)

	out, _, _ := runSS(t, "dump", strconv.Itoa(tg.PID))
	for _, line := range []string{
		fmt.Sprintf("    --- read(%s, …) on %s ---\n", v["pipefd"], pipe),
		fmt.Sprintf("    --- recvfrom(%s, …) on tcp %s -> %s ---\n", v["cfd"], cport, sport),
		fmt.Sprintf("    --- accept(%s, …) on tcp %s (listening) ---\n", v["lfd"], lport),
		fmt.Sprintf("    --- epoll_wait(%s, …) on epoll watching 4: ", v["epfd"]),
	} {
		if !strings.Contains(out, line) {
			t.Errorf("text lacks %q:\n%s", line, out)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// A mutex's owner is itself blocked in read on a pipe: the waiters' edge
// says so (JSON owner_state, the text's wait line and the verdict), the
// pipe as readlink names it.
func TestOwnerBlockedInRead(t *testing.T) {
	tg := testutil.Start(t, buildWaits(t), "holder")
	v := readyVals(t, tg.Ready)
	holder := tidOf(t, v, "holder")
	pipe := fdLink(t, tg.PID, v["pipefd"])
	_, th := waitsJSON(t, strconv.Itoa(tg.PID))
	for _, n := range []string{"waiter-0", "waiter-1"} {
		w := th[n].WaitingFor
		if w == nil || w.OwnerTID == nil || *w.OwnerTID != holder || w.OwnerState == nil {
			t.Fatalf("%s: waiting_for %+v, want the holder %d and its state", n, w, holder)
		}
		st := w.OwnerState
		if want := (wFD{Num: atoi(t, v["pipefd"]), Kind: "pipe", Target: pipe}); st.Syscall != "read" || st.FD == nil || *st.FD != want {
			t.Errorf("%s: owner state %+v %+v, want read on %+v", n, st, st.FD, want)
		}
	}
	out, _, _ := runSS(t, "dump", strconv.Itoa(tg.PID))
	// (the mutex is the global mu: named by its symbol)
	edge := fmt.Sprintf(`mutex mu (%s) held by thread %d "holder", itself blocked in read(%s) on %s`, addrOf(t, v, "mutex"), holder, v["pipefd"], pipe)
	if !strings.Contains(out, "    --- waiting for "+edge+" ---\n") {
		t.Errorf("no wait line %q:\n%s", edge, out)
	}
	if !strings.Contains(out, `Verdict: no deadlock found; 2 threads ("waiter-*") wait for `+edge+"\n") {
		t.Errorf("verdict without the owner's state %q:\n%s", edge, out)
	}
}

// waitsProgress dumps pid with --interval 1s --count 3 (as an operator
// would) in JSON and text.
func waitsProgress(t *testing.T, pids ...int) ([]wProc, string) {
	t.Helper()
	args := []string{"dump", "--json", "--interval", "1s", "--count", "3"}
	for _, pid := range pids {
		args = append(args, strconv.Itoa(pid))
	}
	out, errOut, code := runSS(t, args...)
	if code != 0 {
		t.Fatalf("stackshot %v: exit %d\n%s", args, code, errOut)
	}
	var ps []wProc
	if len(pids) == 1 {
		ps = make([]wProc, 1)
		if err := json.Unmarshal([]byte(out), &ps[0]); err != nil {
			t.Fatalf("bad JSON: %v\n%s", err, out)
		}
	} else if err := json.Unmarshal([]byte(out), &ps); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	text, _, _ := runSS(t, append([]string{"dump"}, args[2:]...)...)
	return ps, text
}

// A thread in a 100 ms timed condition-variable wait, again and again,
// uses almost no CPU: it is waiting, never spinning, and wakes every
// ~100ms (a loaded machine wakes it late, and a snapshot may fall on a
// wake-up: 60 to 400 ms).
func TestProgressTimedWait(t *testing.T) {
	tg := testutil.Start(t, buildWaits(t), "timedwait", "100")
	ticker := tidOf(t, readyVals(t, tg.Ready), "ticker")
	ps, text := waitsProgress(t, tg.PID)
	for _, th := range ps[0].Threads {
		if th.TID != ticker {
			continue
		}
		if th.Progress != "waiting" || th.WakesEveryMS == nil || *th.WakesEveryMS < 60 || *th.WakesEveryMS > 400 {
			t.Errorf("ticker: %s, wakes every %v ms (shares %v), want waiting, every ~100 ms", th.Progress, th.WakesEveryMS, th.CPUShares)
		}
		if th.CPUShare == nil || *th.CPUShare >= 0.1 || len(th.CPUShares) != 2 {
			t.Errorf("ticker: cpu share %v %v, want little, per interval", th.CPUShare, th.CPUShares)
		}
	}
	if s := ps[0].ProgressSummary; s == nil || s.Spinning != 0 || s.Waiting < 1 {
		t.Errorf("summary %+v, want the ticker waiting and nothing spinning", s)
	}
	if !regexp.MustCompile(fmt.Sprintf(`Thread %d "ticker" \(state S, in futex, read without stopping\): \[waiting, wakes every ~\d+ms\]`, ticker)).MatchString(text) {
		t.Errorf("no waiting mark:\n%s", text)
	}
	if !strings.Contains(text, " waiting, ") || !strings.Contains(text, "Progress over 3 snapshots") {
		t.Errorf("no waiting count in the header:\n%s", text)
	}
}

// Threads taking a mutex, sleeping 1 ms, releasing it, forever: on a busy
// machine they queue for a CPU at every wake-up, but they sleep of their
// own accord every time: never spinning. A real spinner is, however busy
// the machine.
func TestProgressSleepLoopAndSpinner(t *testing.T) {
	bin := buildWaits(t)
	loop := testutil.Start(t, bin, "sleeploop")
	spin := testutil.Start(t, bin, "spin")
	v := readyVals(t, spin.Ready)
	ps, _ := waitsProgress(t, loop.PID, spin.PID)
	for _, th := range ps[0].Threads {
		if th.Progress == "spinning" {
			t.Errorf("%s (%d) in a sleep loop is spinning (shares %v)", th.Name, th.TID, th.CPUShares)
		}
	}
	for _, th := range ps[1].Threads {
		if th.TID == tidOf(t, v, "spinner") && th.Progress != "spinning" {
			t.Errorf("the spinner is %s (shares %v)", th.Progress, th.CPUShares)
		}
	}
}

// An idle multi-threaded program: nothing is wrong, and the verdict says
// so, then names the largest group, never one idle thread.
func TestVerdictIdleProgram(t *testing.T) {
	tg := testutil.Start(t, buildWaits(t), "idle", "4")
	p, _ := waitsJSON(t, strconv.Itoa(tg.PID))
	want := `nothing is wrong: no thread waits for a lock, no deadlock; the largest group: 4 threads ("idle-*") waiting for condition variable in idle_worker`
	if p.Verdict != want {
		t.Errorf("verdict %q, want %q", p.Verdict, want)
	}
	ps, _ := waitsProgress(t, tg.PID)
	want = `nothing is wrong: no thread waits for a lock, no deadlock, nothing spinning or stuck on a lock over 3 snapshots; the largest group: 4 threads ("idle-*") waiting for condition variable in idle_worker`
	if ps[0].Verdict != want {
		t.Errorf("verdict over snapshots %q, want %q", ps[0].Verdict, want)
	}
}

// A healthy Redis (its event loop in epoll_wait with a 100 ms timeout,
// its background threads idle) and an idle nginx (master and workers):
// no thread spinning, and the verdict says nothing is wrong.
func TestHealthyServers(t *testing.T) {
	dir := t.TempDir()
	redis := testutil.Need(t, "redis-server")
	raddr := testutil.FreeAddr(t)
	_, rport, _ := strings.Cut(raddr, ":")
	rs := startExec(t, fmt.Sprintf("%s --port %s --bind 127.0.0.1 --save '' --appendonly no --dir %s --logfile %s/redis.log", redis, rport, dir, dir))
	waitListening(t, raddr)
	nginx := testutil.Need(t, "nginx")
	naddr := testutil.FreeAddr(t)
	conf := fmt.Sprintf(`worker_processes 2; pid %[1]s/nginx.pid; error_log %[1]s/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path %[1]s/b; proxy_temp_path %[1]s/p; fastcgi_temp_path %[1]s/f;
  uwsgi_temp_path %[1]s/u; scgi_temp_path %[1]s/s; server { listen %[2]s; root %[1]s; } }
`, dir, naddr)
	if err := os.WriteFile(dir+"/nginx.conf", []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ng := startExec(t, fmt.Sprintf("%s -e %s/error.log -p %s -c %s/nginx.conf -g 'daemon off;'", nginx, dir, dir, dir))
	waitListening(t, naddr)
	workers := nginxWorkers(t, ng.PID, 2)
	t.Cleanup(func() {
		for _, w := range workers {
			syscall.Kill(w, syscall.SIGKILL)
		}
	})
	ps, text := waitsProgress(t, append([]int{rs.PID, ng.PID}, workers...)...)
	for _, p := range ps {
		for _, th := range p.Threads {
			if th.Progress == "spinning" {
				t.Errorf("thread %d %q spinning (shares %v)", th.TID, th.Name, th.CPUShares)
			}
		}
		if !strings.HasPrefix(p.Verdict, "nothing is wrong: ") {
			t.Errorf("verdict %q, want nothing is wrong", p.Verdict)
		}
	}
	// Redis's own event loop waits in epoll_wait, on its listening socket.
	if !regexp.MustCompile(`--- epoll_wait\(\d+, …\) on epoll watching \d+: .*tcp ` + regexp.QuoteMeta(raddr) + ` \(listening\)`).MatchString(text) {
		t.Errorf("redis's epoll_wait does not name its listening socket %s:\n%s", raddr, text)
	}
}

// waitListening waits until something accepts connections at addr.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		if time.Now().After(end) {
			t.Fatalf("nothing listens at %s", addr)
		}
	}
}

// nginxWorkers waits for the n worker processes of nginx's master.
func nginxWorkers(t *testing.T, master, n int) []int {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", master, master))
		var pids []int
		for _, f := range strings.Fields(string(b)) {
			pids = append(pids, atoi(t, f))
		}
		if len(pids) == n && testutil.WaitSettled(pids[0], 20*time.Second) && testutil.WaitSettled(pids[1], 20*time.Second) {
			return pids
		}
		if time.Now().After(end) {
			t.Fatalf("nginx %d has workers %v, want %d", master, pids, n)
		}
	}
}
