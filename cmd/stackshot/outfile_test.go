//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"stackshot/internal/safefile"
	"stackshot/internal/testutil"
)

// nobody is the uid/gid the attacker in these tests runs as.
const nobody = 65534

// asNobody runs a command as uid/gid nobody (the other user of the
// attacks); the test runs as root.
func asNobody(t *testing.T, args ...string) {
	t.Helper()
	setpriv := testutil.Need(t, "setpriv")
	cmd := exec.Command(setpriv, append([]string{"--reuid", fmt.Sprint(nobody), "--regid", fmt.Sprint(nobody), "--clear-groups", "--"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as nobody: %v: %v\n%s", args, err, out)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Skip(t, "the attacks need root as the victim and another user as the attacker")
	}
}

// attackDirs makes a sticky world-writable directory (as /tmp is) where the
// attacker plants, and a root-only file elsewhere that root must never
// overwrite.
func attackDirs(t *testing.T) (shared, victim string) {
	t.Helper()
	top, err := os.MkdirTemp("", "stackshot-outfile")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	shared = filepath.Join(top, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777|os.ModeSticky)
	private := filepath.Join(top, "private")
	os.Mkdir(private, 0o700)
	victim = filepath.Join(private, "secret")
	if err := os.WriteFile(victim, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return shared, victim
}

func currentUmask() os.FileMode {
	old := syscall.Umask(0o022)
	syscall.Umask(old)
	return os.FileMode(old)
}

func checkVictim(t *testing.T, victim string) {
	t.Helper()
	if b, _ := os.ReadFile(victim); string(b) != "root only\n" {
		t.Errorf("the root-only file was overwritten: %q", b)
	}
}

// checkOwnFile checks that path is a regular file owned by us, with perm,
// holding data.
func checkOwnFile(t *testing.T, path string, perm os.FileMode, data string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || int(st.Uid) != os.Geteuid() || fi.Mode().Perm() != perm {
		t.Errorf("%s: mode %v uid %d, want a regular file of uid %d, %v", path, fi.Mode(), st.Uid, os.Geteuid(), perm)
	}
	if b, _ := os.ReadFile(path); string(b) != data {
		t.Errorf("%s holds %q, want %q", path, b, data)
	}
}

// Another user plants symlinks to a root-only file, and a file of their
// own, at the temporary names an output file used to go through
// (FILE.tmp.PID): root's -o must neither write through them nor adopt them.
func TestOutputPlantedTempNames(t *testing.T) {
	needRoot(t)
	shared, victim := attackDirs(t)
	out := filepath.Join(shared, "out.txt")
	for _, pid := range []int{os.Getpid(), os.Getpid() + 1} {
		asNobody(t, "ln", "-s", victim, fmt.Sprintf("%s.tmp.%d", out, pid))
	}
	if err := safefile.Output(out, []byte("report\n"), safefile.Public); err != nil {
		t.Fatalf("writeOutput: %v", err)
	}
	checkVictim(t, victim)
	checkOwnFile(t, out, 0o644&^currentUmask(), "report\n")

	// A planted regular file, writable by all, owned by the attacker.
	out2 := filepath.Join(shared, "out2.txt")
	asNobody(t, "sh", "-c", fmt.Sprintf("umask 0; : > %s.tmp.%d", out2, os.Getpid()))
	if err := safefile.Output(out2, []byte("report\n"), safefile.Public); err != nil {
		t.Fatalf("writeOutput: %v", err)
	}
	checkOwnFile(t, out2, 0o644&^currentUmask(), "report\n")
}

// A destination that is a symlink, or another user's file, is refused and
// left as it was.
func TestOutputRefusesForeignDestination(t *testing.T) {
	needRoot(t)
	shared, victim := attackDirs(t)
	link := filepath.Join(shared, "link.txt")
	asNobody(t, "ln", "-s", victim, link)
	if err := safefile.Output(link, []byte("report\n"), safefile.Public); err == nil {
		t.Errorf("wrote to a symlink destination")
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi, err)
	}
	checkVictim(t, victim)

	theirs := filepath.Join(shared, "theirs.txt")
	asNobody(t, "sh", "-c", "echo mine > "+theirs)
	if err := safefile.Output(theirs, []byte("report\n"), safefile.Public); err == nil {
		t.Errorf("replaced a file owned by another user")
	}
	if b, _ := os.ReadFile(theirs); string(b) != "mine\n" {
		t.Errorf("the other user's file now holds %q", b)
	}
}

// Captures (raw stack bytes: keys, passwords) are 0600 whatever the umask;
// reports are 0644 less the umask. Both written by the command, for real.
func TestOutputModes(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	dir := t.TempDir()
	capPath := filepath.Join(dir, "snap.cap")
	repPath := filepath.Join(dir, "snap.txt")
	sh := fmt.Sprintf("umask 022; %s capture %d -o %s && umask 027 && %s dump %d -o %s",
		stackshotBin, tg.PID, capPath, stackshotBin, tg.PID, repPath)
	if out, err := exec.Command("sh", "-c", sh).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for path, want := range map[string]os.FileMode{capPath: 0o600, repPath: 0o640} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(path), fi.Mode().Perm(), want)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

// A directory on the way that is another user's symlink (planted in /tmp to
// point at a root-only directory) is not followed: root would replace a
// file there. Root's own links are followed.
func TestOutputPlantedDirectoryLink(t *testing.T) {
	needRoot(t)
	shared, victim := attackDirs(t)
	link := filepath.Join(shared, "d")
	asNobody(t, "ln", "-s", filepath.Dir(victim), link)
	if err := safefile.Output(filepath.Join(link, filepath.Base(victim)), []byte("report\n"), safefile.Public); err == nil {
		t.Errorf("wrote through another user's directory symlink")
	}
	checkVictim(t, victim)

	mine := filepath.Join(shared, "mine")
	if err := os.Symlink(filepath.Dir(victim), mine); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(mine, "ok.txt")
	if err := safefile.Output(out, []byte("report\n"), safefile.Public); err != nil {
		t.Fatalf("root's own directory link refused: %v", err)
	}
	checkOwnFile(t, filepath.Join(filepath.Dir(victim), "ok.txt"), 0o644&^currentUmask(), "report\n")
	checkVictim(t, victim)
}
