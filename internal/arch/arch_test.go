package arch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

func TestSyscallName(t *testing.T) {
	for nr, want := range map[int64]string{0: "read", 202: "futex", 232: "epoll_wait", 435: "clone3", 467: "open_tree_attr", 9999: "syscall_9999"} {
		if got := SyscallName(nr); got != want {
			t.Errorf("SyscallName(%d) = %q, want %q", nr, got, want)
		}
	}
}

// TestSyscallTableGenerated: the table carries the one-line header Go tools
// recognise, and regenerating it from the installed uapi header changes
// nothing.
func TestSyscallTableGenerated(t *testing.T) {
	src, err := os.ReadFile("syscalls_x86.go")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`).Match(src) {
		t.Fatalf("syscalls_x86.go lacks the generated-file header line")
	}
	const header = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
	if _, err := os.Stat(header); err != nil {
		t.Skipf("skipped: %s is not installed (linux-libc-dev)", header)
	}
	out := filepath.Join(t.TempDir(), "gen.go")
	if b, err := exec.Command("go", "run", "gen_syscalls.go", "-header", header, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("gen_syscalls: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Errorf("regenerating syscalls_x86.go changes it: run go generate ./internal/arch")
	}
}
