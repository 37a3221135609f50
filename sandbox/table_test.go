//go:build linux

package sandbox

import (
	"reflect"
	"strings"
	"testing"

	"stackshot/report"
)

// A table carries each distinct item once; the parent refuses indexes
// that do not fit, before it sets anything.
func TestTable(t *testing.T) {
	items := []string{"a", "b", "", "a", "c", "b"}
	tab, of := tabulate(items, func(s string) (string, bool) { return s, s != "" })
	if !reflect.DeepEqual(tab, []string{"a", "b", "c"}) || !reflect.DeepEqual(of, []int{0, 1, -1, 0, 2, 1}) {
		t.Fatalf("table %q, indexes %v", tab, of)
	}
	got := make([]string, len(items))
	if err := untabulate(tab, of, len(items), "item", func(i int, s string) { got[i] = s }); err != nil || !reflect.DeepEqual(got, items) {
		t.Errorf("back: %q, %v", got, err)
	}
	for name, c := range map[string]struct {
		of   []int
		n    int
		want string
	}{
		"past the table":  {[]int{0, 3}, 2, "item 1: entry 3 of 3"},
		"below none":      {[]int{-2}, 1, "item 0: entry -2"},
		"an item missing": {[]int{0}, 2, "for 1 of 2 items"},
	} {
		set := false
		err := untabulate(tab, c.of, c.n, "item", func(int, string) { set = true })
		if err == nil || !strings.Contains(err.Error(), c.want) || set {
			t.Errorf("%s: %v (set %v), want an error with %q and nothing set", name, err, set, c.want)
		}
	}
}

// Threads waiting alike share an entry; owners and notes tell entries
// apart.
func TestShareWaits(t *testing.T) {
	one, two := 1, 2
	cond := &report.WaitingFor{Kind: "condvar", Address: 0x10, Note: "a condition variable has no owner"}
	waits := []*report.WaitingFor{
		cond, {Kind: "condvar", Address: 0x10, Note: "a condition variable has no owner"}, nil,
		{Kind: "mutex", Address: 0x20, OwnerTID: &one}, {Kind: "mutex", Address: 0x20, OwnerTID: &two},
		{Kind: "mutex", Address: 0x20, OwnerTID: &one},
	}
	tab, of := shareWaits(waits)
	if len(tab) != 3 || !reflect.DeepEqual(of, []int{0, 0, -1, 1, 2, 1}) {
		t.Errorf("%d entries, indexes %v; want 3, [0 0 -1 1 2 1]", len(tab), of)
	}
}
