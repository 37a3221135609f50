//go:build linux

package procmaps

import (
	"os"
	"testing"
)

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A TaskCache reads a thread's files as the plain readers do, keeps them
// open until Forget or Close, and reads after a failed read elsewhere
// (which puts an empty buffer back in the shared pool). The process's task
// directory, which the files are opened relative to, stays open until
// Close or a Retain of none of its threads.
func TestTaskCache(t *testing.T) {
	pid := os.Getpid()
	before := openFDs(t)
	c := NewTaskCache()
	for round := 0; round < 3; round++ {
		if err := readSmall("/proc/self/no-such-file", func([]byte) {}); err == nil {
			t.Fatal("read of a missing file succeeded")
		}
		st, err := c.ReadStat(pid, pid)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ReadStat(pid, pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.Comm != want.Comm || st.State == 0 || st.StartTime != want.StartTime {
			t.Errorf("cached stat %+v, plain %+v", st, want)
		}
		if _, err := c.ReadSchedStat(pid, pid); err != nil {
			t.Fatal(err)
		}
		if n := openFDs(t); n != before+3 { // task directory, stat, schedstat
			t.Errorf("%d descriptors open, want %d", n, before+3)
		}
		c.Forget(pid, pid)
		if n := openFDs(t); n != before+1 {
			t.Errorf("%d descriptors open after Forget, want %d (the task directory)", n, before+1)
		}
		if round == 1 {
			c.Retain(pid, nil)
			if n := openFDs(t); n != before {
				t.Errorf("%d descriptors open after Retain of no thread, want %d", n, before)
			}
		}
	}
	if _, err := c.ReadStat(pid, 1<<30); err == nil {
		t.Error("stat of a missing thread read")
	}
	c.Close()
	if n := openFDs(t); n != before {
		t.Errorf("%d descriptors open after Close, want %d", n, before)
	}
}
