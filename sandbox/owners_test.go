//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
)

// A root process whose program another user could have written goes to
// the child: the program owned by that user, writable by anyone, or in a
// directory that user owns or anyone may write in (unless sticky). The
// same program, root's in root's directories, or in a sticky one, stays
// in-process. What decides is set up here, the program copied and its
// modes and owners changed before it starts.
func TestNeededForForeignCode(t *testing.T) {
	needRoot(t)
	t.Setenv("STACKSHOT_SANDBOX", "")
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-pthread")
	prog, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		fileUID, dirUID int
		fileMode        os.FileMode
		dirMode         os.FileMode
		want            string // in foreignCode's reason; "": none
	}{
		{"root's", 0, 0, 0o755, 0o755, ""},
		{"sticky directory", 0, 0, 0o755, 0o777 | os.ModeSticky, ""},
		{"owned by another user", otherUser, 0, 0o755, 0o755, "owned by uid 1000"},
		{"writable by anyone", 0, 0, 0o757, 0o755, "writable by anyone"},
		{"writable by another group", 0, 0, 0o775, 0o755, "writable by group"},
		{"directory of another user", 0, otherUser, 0o755, 0o755, ": owned by uid 1000"},
		{"directory writable by anyone", 0, 0, 0o755, 0o777, ": writable by others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bin")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "blocked")
			if err := os.WriteFile(p, prog, 0o755); err != nil {
				t.Fatal(err)
			}
			// (group 1000 for the group case: a group of another user's)
			must(t, os.Chown(p, tc.fileUID, otherUser))
			must(t, os.Chmod(p, tc.fileMode))
			must(t, os.Chown(dir, tc.dirUID, 0))
			must(t, os.Chmod(dir, tc.dirMode))
			// (the test's temporary directory above it is root's, 0700)
			tg := testutil.Start(t, p)
			maps, err := procmaps.ReadMaps(tg.PID)
			if err != nil {
				t.Fatal(err)
			}
			why := foreignCode(tg.PID, maps)
			if tc.want == "" && why != "" || tc.want != "" && (!strings.Contains(why, tc.want) || !strings.HasPrefix(why, p)) {
				t.Errorf("foreign code %q, want %q", why, tc.want)
			}
			if Needed(tg.PID) != (tc.want != "") {
				t.Errorf("Needed %v for a root process running %s", !(tc.want != ""), tc.name)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
