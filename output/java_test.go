package output

import (
	"strings"
	"testing"

	"stackshot/report"
)

// A Java frame reads as jstack's line with its frame type (a native
// method's "Native Method"); a cycle of
// Java monitor waits is a Java-level deadlock naming the monitors' classes.
func TestJavaFramesAndDeadlockText(t *testing.T) {
	one, two := 11, 12
	p := &report.Process{PID: 1, Comm: "java", Diagnosed: true,
		Threads: []report.Thread{
			{TID: 11, Name: "java", JavaName: "a", JavaState: "blocked",
				Frames: []report.Frame{
					{Kind: "user", Function: "JVM_Sleep", PC: 0x10},
					{Kind: "java", Function: "com.acme.Pool.take", File: "Pool.java", Line: 212, FrameType: report.FrameInlined},
					{Kind: "java", Function: "com.acme.Pool.run", FrameType: report.FrameCompiled},
					{Kind: "java", Function: "com.acme.Pool.poll"}, // a native method
				},
				WaitingFor: &report.WaitingFor{Kind: report.WaitMonitor, Address: 0x69ec1bbd8, Class: "Deadlocks$LockB", OwnerTID: &two}},
			{TID: 12, Name: "java", WaitingFor: &report.WaitingFor{Kind: report.WaitMonitor, Address: 0x69ec1b440, Class: "Deadlocks$LockA", OwnerTID: &one}},
		},
		Deadlocks: []report.Deadlock{{TIDs: []int{11, 12}, Addresses: []uint64{0x69ec1bbd8, 0x69ec1b440}}},
	}
	var b strings.Builder
	if err := Text(&b, []*report.Process{p}, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`Verdict: a Java-level deadlock (threads 11, 12)`,
		`DEADLOCK: thread 11 "java" waits for Java monitor 0x69ec1bbd8 (a Deadlocks$LockB) held by thread 12 "java", which waits for Java monitor 0x69ec1b440 (a Deadlocks$LockA) held by thread 11 "java"`,
		`Thread 11 "java" (state ?, java "a" blocked, `,
		"#1   com.acme.Pool.take(Pool.java:212) [java inlined]\n",
		"#2   com.acme.Pool.run(Unknown Source) [java compiled]\n",
		"#3   com.acme.Pool.poll(Native Method) [java native]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}
