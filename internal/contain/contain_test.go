package contain

import (
	"errors"
	"strings"
	"testing"
)

func crash(s []int) int { return s[3] }

func TestCall(t *testing.T) {
	if err := Call("nothing", func() {}); err != nil {
		t.Fatalf("no panic, got %v", err)
	}
	err := Call("unwinding thread 7", func() { crash(nil) })
	var p *Panic
	if !errors.As(err, &p) {
		t.Fatalf("got %v, want a *Panic", err)
	}
	msg := err.Error()
	for _, want := range []string{"internal error while unwinding thread 7", "index out of range", "contain.crash contain_test.go:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
}
