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

// TestDo: a panic becomes a *Panic naming the work; an error passes.
func TestDo(t *testing.T) {
	err := Do("parse x", func() error { var m map[string]int; m["a"] = 1; return nil })
	var p *Panic
	if !errors.As(err, &p) || p.What != "parse x" {
		t.Errorf("Do = %v, want a *Panic for parse x", err)
	}
	want := errors.New("plain")
	if err := Do("y", func() error { return want }); err != want {
		t.Errorf("Do passed %v, want %v", err, want)
	}
}
