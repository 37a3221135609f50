package output

import (
	"bytes"
	"strings"
	"testing"
)

func TestProfileText(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteProfileText(&buf, fixtureProfile(), 3); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	// By hand from the fixture: 164 samples; the top stacks are 60, 40 and
	// 27 (samples 2 and 3 merged: same process, thread name and stack);
	// leaves by self; main and __libc_start_call_main are on every stack
	// but the truncated one (161), hot_a and what is above it on 100.
	for _, want := range []string{
		"Profile: 10s from 2026-11-30T12:00:00Z, 99 Hz requested, 99.0 Hz achieved (990 ticks)\n",
		"Samples: 164 thread stacks from 6 threads in 2 processes (on-CPU: running threads only)\n",
		"  4242 myserver (/usr/sbin/myserver)\n",
		"  5151 batch;job (/opt/batch/bin/batch)\n",
		"Truncated stacks: 3 (1.8%): no-cfi 2, depth 1\n",
		"Per-thread pause: median 12.5us, p99 40.2us, max 88.0us\n",
		"\nTop 3 stacks of 8:\n",
		"\n      60  36.59%  myserver (pid 4242) thread \"worker-1\" (tid 4243)\n" +
			"                   clear_page_erms_[k]\n                   asm_exc_page_fault_[k]\n" +
			"                   hot_a_inner\n                   hot_a\n" +
			"                   operator<<(std::ostream&, Foo const&)\n                   main\n" +
			"                   __libc_start_call_main\n",
		"\n      40  24.39%  myserver (pid 4242) thread \"worker-2\" (tid 4244)\n",
		"\n      27  16.46%  myserver (pid 4242) thread \"worker-2\" (tid 4244)\n                   hot_b\n",
		"\nTop 3 functions by self samples:\n" +
			"    self   self%    total  total%  function\n" +
			"      60  36.59%       60  36.59%  clear_page_erms_[k]\n" +
			"      40  24.39%      100  60.98%  hot_a_inner\n" +
			"      27  16.46%       27  16.46%  hot_b\n",
		"\nTop 3 functions by total samples:\n" +
			"    self   self%    total  total%  function\n" +
			"       0   0.00%      161  98.17%  __libc_start_call_main\n" +
			"       0   0.00%      161  98.17%  main\n" +
			"       0   0.00%      100  60.98%  hot_a\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q\n--- output:\n%s", want, got)
		}
	}
	if strings.Contains(got, "15   9.15%  batch") {
		t.Errorf("fourth stack listed with top 3")
	}
}

func TestProfileTextEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteProfileText(&buf, &Profile{FreqHz: 99}, 0); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	for _, want := range []string{"Samples: 0 thread stacks", "Top 0 stacks of 0:", "Top 0 functions by self samples:"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
