//go:build linux

package procmaps

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"stackshot/internal/testutil"
)

// SharesRoot holds for a process that sees the filesystem as stackshot
// does, and for neither one chrooted elsewhere nor one in a mount
// namespace of its own.
func TestSharesRoot(t *testing.T) {
	if !SharesRoot(os.Getpid(), 0) || !SameMountNamespace(os.Getpid()) {
		t.Fatal("stackshot's own process does not share its root")
	}
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-static", "-pthread")
	plain := testutil.Start(t, bin, "1")
	if !SharesRoot(plain.PID, 0) {
		t.Errorf("a plain child (pid %d) does not share the root", plain.PID)
	}
	if SharesRoot(plain.PID, plain.PID+100000) {
		t.Error("a thread that does not exist shares the root")
	}
	if os.Geteuid() != 0 {
		t.Skip("chroot and mount namespaces need root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("cp", bin, filepath.Join(dir, "many")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	jailed := testutil.Start(t, "chroot", dir, "/many", "1")
	if SharesRoot(jailed.PID, 0) || !SameMountNamespace(jailed.PID) {
		t.Errorf("a chrooted child: shares the root %v, same mount namespace %v; want false, true",
			SharesRoot(jailed.PID, 0), SameMountNamespace(jailed.PID))
	}
	if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
		t.Skipf("this machine does not allow mount namespaces (unshare -m: %v: %s)", err, out)
	}
	apart := testutil.Start(t, "unshare", "-m", "--propagation", "private", bin, "1")
	if SharesRoot(apart.PID, 0) || SameMountNamespace(apart.PID) {
		t.Errorf("a child in a mount namespace of its own shares the root (%v) or the namespace (%v)",
			SharesRoot(apart.PID, 0), SameMountNamespace(apart.PID))
	}
}
