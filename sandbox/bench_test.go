//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/resolve"
	"stackshot/symtab"
)

// BenchmarkColdDump is a whole cold dump of a small process of another
// user (blocked.c, 8 threads): capture in auto mode, unwind and symbolize
// with nothing cached, in-process and through a new sandboxed child (its
// start, lockdown and every file handed over included).
func BenchmarkColdDump(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	setpriv := testutil.Need(b, "setpriv")
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(b, setpriv, "--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--clear-groups", "--", bin)
	st, err := procmaps.ReadStatus(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	tgt := Target{PID: tg.PID, UID: st.UIDs[1], GID: st.GIDs[1]}
	opts := resolve.Options{Live: true}
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			r := resolve.NewResolver(symtab.New(symtab.Options{}), opts)
			p, err := r.CaptureLive(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto})
			if err != nil {
				b.Fatal(err)
			}
			r.Process(p, ptrace.MemReader{PID: p.MemPID()})
		}
	})
	b.Run("sandbox", func(b *testing.B) {
		for b.Loop() {
			c, err := Start(Config{Resolve: opts}, tgt)
			if err != nil {
				b.Fatal(err)
			}
			mem := ptrace.MemReader{PID: tg.PID}
			p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check(mem))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Resolve(p); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(c.calls[kMem]), "memcalls/op")
			b.ReportMetric(float64(c.calls[kOpen]), "opens/op")
			c.Close()
		}
	})
	b.Run("sandbox-start", func(b *testing.B) {
		for b.Loop() {
			c, err := Start(Config{Resolve: opts}, tgt)
			if err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
}
