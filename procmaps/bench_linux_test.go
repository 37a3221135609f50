//go:build linux

package procmaps

import (
	"fmt"
	"testing"

	"stackshot/internal/testutil"
)

// BenchmarkTaskFiles reads the files a dump reads for each thread of a
// 512-thread target (testdata/targets/many.c, blocked in
// pthread_cond_wait), the way a one-shot capture does (a TaskCache:
// opened relative to the task directory, one pread, closed when done
// with the thread): each file alone, schedstat twice through one open
// (the no-stop check), and all four. ns/thread is the cost per thread,
// most of it the kernel's (opening, printing, closing); ns/op is one pass
// over every thread.
func BenchmarkTaskFiles(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(b, bin, "512")
	tids, err := Tasks(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	read := map[string]func(c *TaskCache, tid int) error{
		"stat": func(c *TaskCache, tid int) error { _, err := c.ReadStat(tg.PID, tid); return err },
		"syscall": func(c *TaskCache, tid int) error {
			_, err := c.ReadSyscall(tg.PID, tid)
			return err
		},
		"stack": func(c *TaskCache, tid int) error { _, err := c.ReadKernelStack(tg.PID, tid); return err },
		"schedstat-twice": func(c *TaskCache, tid int) error {
			if _, err := c.ReadSchedStat(tg.PID, tid); err != nil {
				return err
			}
			_, err := c.ReadSchedStat(tg.PID, tid)
			return err
		},
	}
	order := []string{"stat", "syscall", "stack", "schedstat-twice"}
	read["all-four"] = func(c *TaskCache, tid int) error {
		for _, name := range order {
			if err := read[name](c, tid); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range append(order, "all-four") {
		b.Run(name, func(b *testing.B) {
			c := NewTaskCache()
			defer c.Close()
			for i := 0; i < b.N; i++ {
				for _, tid := range tids {
					if err := read[name](c, tid); err != nil {
						b.Fatal(fmt.Errorf("thread %d: %w", tid, err))
					}
					c.Forget(tg.PID, tid)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tids)), "ns/thread")
		})
	}
}
