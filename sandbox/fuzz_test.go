//go:build linux

package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzRecvUp feeds the parent's reader of the child's frames with what a
// compromised child could send: it returns a message or an error, within
// its bounds, never a panic.
func FuzzRecvUp(f *testing.F) {
	f.Add([]byte(`{"k":"open","root":"/proc/1/root","path":"/etc/shadow","follow":true}`))
	f.Add([]byte(`{"k":"mem","addr":18446744073709551615,"len":-1}`))
	f.Add([]byte(`{"k":"resolve","result":{"pid":1,"threads":[{"tid":1,"frames":[{"function":"\u001b[2J"}]}]}}`))
	f.Add([]byte(`{"k":"names","frames":[[{"pc":1}],null]}`))
	f.Add([]byte(`{"k":"resolve","result":{"Threads":[{"TID":1},{"TID":2}]},"frame_tab":[{"PC":1,"Function":"f"}],"frame_of":[[0,0],[0]],"frame_sp":[[8,16],[24]]}`))
	f.Add([]byte(`{"k":"resolve","result":{"Threads":[{"TID":1}]},"frame_tab":[],"frame_of":[[5]],"frame_sp":[[1]]}`))
	f.Add([]byte(`{"k":"cacheput","key":{"Kind":"symbols","BuildID":"ab"},"len":3}a\x00c`))
	f.Add([]byte{0xff, 0xfe, '{'})
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
			if err == nil && joinFrames(m) == nil && m.Result != nil {
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
