//go:build linux

package seccomp

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The filtered process: the test binary run again with this variable set.
// It installs the filter, then tries each call and prints what came back.
func TestMain(m *testing.M) {
	if os.Getenv("SECCOMP_TEST_CHILD") == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	if err := Deny([]string{"openat", "open", "getppid", "socket"}); err != nil {
		fmt.Println("deny:", err)
		return 1
	}
	report := func(call string, err error) { fmt.Printf("%s=%v\n", call, err) }
	_, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
	report("openat", err)
	_, _, errno := unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
	report("getppid", errnoErr(errno))
	_, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	report("socket", err)
	// Allowed calls still work, on every thread (TSYNC): the runtime's
	// own threads make them too.
	_, _, errno = unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
	report("getpid", errnoErr(errno))
	_, _, errno = unix.RawSyscall(unix.SYS_GETTID, 0, 0, 0)
	report("gettid", errnoErr(errno))
	// getpid through the x32 ABI's numbering: refused by the filter
	// (ENOSYS without it where x32 is off, success where it is on).
	_, _, errno = unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
	report("x32-getpid", errnoErr(errno))
	return 0
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func TestDenyInProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SECCOMP_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("filtered child: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	eperm := unix.EPERM.Error()
	for call, want := range map[string]string{"openat": eperm, "getppid": eperm, "socket": eperm, "x32-getpid": eperm,
		"getpid": "<nil>", "gettid": "<nil>"} {
		if got[call] != want {
			t.Errorf("%s in the filtered process: %q, want %q (output:\n%s)", call, got[call], want, out)
		}
	}
}

func TestProgramRejects(t *testing.T) {
	if _, err := Program([]string{"openat", "opnat"}); err == nil || !strings.Contains(err.Error(), `"opnat"`) {
		t.Errorf("a misspelt name: %v, want an error naming it", err)
	}
	many := make([]string, 201)
	for i := range many {
		many[i] = "read"
	}
	if _, err := Program(many); err == nil {
		t.Error("201 names: no error, but jumps past 255 cannot be encoded")
	}
}

// TestProgramShape checks the jump targets: every jump lands inside the
// program, the denied numbers jump to the EPERM return, the fall-through
// is the allow return.
func TestProgramShape(t *testing.T) {
	prog, err := Program([]string{"openat", "execve"})
	if err != nil {
		t.Fatal(err)
	}
	n := len(prog)
	if prog[n-1].K != errnoEPERM || prog[n-2].K != unix.SECCOMP_RET_ALLOW {
		t.Fatalf("last two instructions %+v %+v, want allow then EPERM", prog[n-2], prog[n-1])
	}
	for i, in := range prog {
		if in.Code&0x07 != unix.BPF_JMP {
			continue
		}
		for _, off := range []uint8{in.Jt, in.Jf} {
			if i+1+int(off) >= n {
				t.Errorf("instruction %d jumps past the end", i)
			}
		}
		if in.Code == bpfJeqK && (in.K == 257 || in.K == 59) && i+1+int(in.Jt) != n-1 {
			t.Errorf("instruction %d (nr %d) does not jump to the EPERM return", i, in.K)
		}
	}
}
