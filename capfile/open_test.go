//go:build linux

package capfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO given as a saved capture is refused at once, in the command
// line's words, instead of blocking the open until a writer comes (the
// test would hang without O_NONBLOCK); a file that is no capture says how
// to make one.
func TestOpenFileRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "snap.cap")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	f, _, err := OpenFile(fifo)
	if want := "cannot read " + fifo + " (not a regular file; give a capture file or a core)"; err == nil || err.Error() != want {
		if f != nil {
			f.Close()
		}
		t.Fatalf("OpenFile of a FIFO: %v, want %q", err, want)
	}
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not a capture at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, size, err := OpenFile(junk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = Load(f, size)
	msg := LoadError(junk, err).Error()
	if !errors.Is(err, ErrNotCapture) || !strings.HasPrefix(msg, "cannot read "+junk+" (") ||
		!strings.HasSuffix(msg, "; make one with 'stackshot capture PID -o FILE')") {
		t.Errorf("Load of junk: %v, said %q", err, msg)
	}
}
