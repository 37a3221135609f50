//go:build linux

package sandbox

import (
	"fmt"
	"strings"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
)

// A process that has ids of the child's range in any place (real, effective uid and
// gid, the first and the last of a thousand supplementary groups: its
// Groups line is longer than the buffer a status file is first read into)
// has each of them in use.
func TestIDsInUse(t *testing.T) {
	needRoot(t)
	setpriv := testutil.Need(t, "setpriv")
	const ruid, euid, rgid, egid, first, last = 97001, 97002, 97003, 97004, 97005, 97006
	groups := []string{fmt.Sprint(first)}
	for i := range 1000 {
		groups = append(groups, fmt.Sprint(90000+i))
	}
	groups = append(groups, fmt.Sprint(last))
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, setpriv, "--ruid", fmt.Sprint(ruid), "--euid", fmt.Sprint(euid), "--rgid", fmt.Sprint(rgid),
		"--egid", fmt.Sprint(egid), "--groups", strings.Join(groups, ","), "--", bin)
	st, err := procmaps.ReadStatus(tg.PID)
	if err != nil || st.UIDs[0] != ruid || st.UIDs[1] != euid {
		t.Fatalf("target runs as %+v (%v)", st.UIDs, err)
	}
	used, err := idsInUse()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{ruid, euid, rgid, egid, first, last} {
		if !used[id] {
			t.Errorf("id %d of process %d said free", id, tg.PID)
		}
	}
}
