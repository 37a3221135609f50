package otlp

import (
	"testing"
)

// FuzzAnswer: the collector's answers (partial success, error status) are
// read by hand; any bytes must give a result or an error, never a panic,
// and a message read is part of the input.
func FuzzAnswer(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x0e, 0x08, 0x03, 0x12, 0x0a, 'b', 'a', 'd', ' ', 's', 't', 'a', 'c', 'k', 's'})
	f.Add(statusBody(3, "oops"))
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, m, err := partialSuccess(b)
		if err != nil && (r != 0 || m != "") {
			t.Errorf("error %v with a result %d %q", err, r, m)
		}
		if len(m) > len(b) {
			t.Errorf("message longer than the answer")
		}
		if s, ok := statusMessage(b); ok && len(s) > len(b) {
			t.Errorf("status message longer than the answer")
		}
		clip(string(b))
		kindOf("", b)
	})
}
