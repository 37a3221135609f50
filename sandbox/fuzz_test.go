//go:build linux

package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"stackshot/ptrace"
)

// FuzzRecvUp feeds the parent's reader of the child's frames with what a
// compromised child could send: it returns a message or an error, within
// its bounds, never a panic.
func FuzzRecvUp(f *testing.F) {
	f.Add([]byte(`{"k":"open","root":"/proc/1/root","path":"/etc/shadow","follow":true}`))
	f.Add([]byte(`{"k":"mem","addr":18446744073709551615,"len":-1}`))
	f.Add([]byte(`{"k":"resolve","result":{"pid":1,"threads":[{"tid":1,"frames":[{"function":"\u001b[2J"}]}]}}`))
	f.Add([]byte(`{"k":"names","frames":[[{"pc":1}],null]}`))
	// Two threads' frames: two, then one (frame_refs: 2, 0 +8, 0 +8, 1, 0 +24).
	f.Add([]byte(`{"k":"resolve","result":{"PID":1},"unwound":[{"s":"end of stack"},{"e":"x"}],"frame_tab":[{"PC":1,"Function":"f"}],"frame_refs":"AgAQABABADA="}`))
	f.Add([]byte(`{"k":"resolve","result":{"Threads":[{"TID":1}]},"unwound":[{},{}],"frame_tab":[],"frame_refs":"AQUC"}`))
	f.Add([]byte(`{"k":"cacheput","key":{"Kind":"symbols","BuildID":"ab"},"len":3}a\x00c`))
	f.Add([]byte{0xff, 0xfe, '{'})
	// The capture the answers are for.
	capture := &ptrace.Process{PID: 1, Threads: []ptrace.Thread{{TID: 1}, {TID: 2}}}
	f.Fuzz(func(t *testing.T, payload []byte) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Skip(err)
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		if len(payload) > 32<<10 {
			payload = payload[:32<<10]
		}
		// The frame as sent, and the same bytes with a lying length.
		for _, n := range []uint32{uint32(len(payload)), uint32(len(payload)) + 1<<30} {
			var hdr [4]byte
			binary.LittleEndian.PutUint32(hdr[:], n)
			go func() { unix.Write(fds[1], append(hdr[:], payload...)) }()
			m, err := recvUp(fds[0])
			if err == nil && m == nil {
				t.Fatal("no message and no error")
			}
			if err == nil && joinFrames(m, capture) == nil && m.Result != nil {
				n := 0
				for _, th := range m.Result.Threads {
					n += len(th.Frames)
				}
				if n > maxSharedFrames {
					t.Fatalf("%d frames rebuilt", n)
				}
			}
			if n != uint32(len(payload)) {
				if err == nil {
					t.Fatalf("a %d-byte frame was accepted", n)
				}
				break
			}
		}
	})
}
