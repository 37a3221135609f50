//go:build linux

package sandbox

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"stackshot/internal/diskcache"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
)

// FuzzRecvUp feeds the parent's reader of the child's frames with what a
// compromised child could send: it returns a message or an error, within
// its bounds, never a panic.
func FuzzRecvUp(f *testing.F) {
	for _, seed := range upSeeds() {
		f.Add(encodeValue(nil, &seed.m))
	}
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
			m, err := recvUp(fds[0], 0)
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
			if err == nil && m.Kind == kRuntime {
				rp := &report.Process{Threads: []report.Thread{{TID: 1}, {TID: 2}}}
				if joinRuntime(rp, m, "python") == nil && len(rp.Threads[0].Frames)+len(rp.Threads[1].Frames) > 2*pyruntime.MaxFrames {
					t.Fatalf("%d frames taken", len(rp.Threads[0].Frames)+len(rp.Threads[1].Frames))
				}
				for _, th := range rp.Threads {
					if len(th.PythonName) > pyruntime.MaxName || !utf8.ValidString(th.PythonName) {
						t.Fatalf("thread %d: Python name %q taken", th.TID, th.PythonName)
					}
				}
			}
			if err == nil && m.Kind == kRuntimeLocks {
				rp := rlockWaiters()
				if joinRuntimeLocks(rp, []int{0, 1}, m, map[int]bool{1: true, 2: true}) == nil {
					for _, th := range rp.Threads {
						if o := th.WaitingFor.OwnerTID; o != nil && *o != 1 && *o != 2 || len(th.WaitingFor.Note) > maxRuntimeNote+len("asked") {
							t.Fatalf("taken: %+v", *th.WaitingFor)
						}
					}
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

// upSeed is a frame a compromised child could send, for FuzzRecvUp (and
// FuzzCacheKey, the keys among them).
type upSeed struct {
	name string
	m    upMsg
}

func upSeeds() []upSeed {
	return []upSeed{
		{"open_shadow", upMsg{Kind: kOpen, Root: "/proc/1/root", Path: "/etc/shadow", Follow: true}},
		{"mem_huge", upMsg{Kind: kMem, Addr: 1<<64 - 1, Len: 1 << 30}},
		{"result_escape", upMsg{Kind: kResolve, Result: &report.Process{PID: 1,
			Threads: []report.Thread{{TID: 1, Frames: []report.Frame{{Function: "\x1b[2J"}}}}}}},
		{"names_nil", upMsg{Kind: kNames, Frames: [][]report.Frame{{{PC: 1}}, nil}}},
		// Two threads' frames: two, then one (refs: 2, 0 +8, 0 +8, 1, 0 +24).
		{"refs_two", upMsg{Kind: kResolve, Result: &report.Process{PID: 1},
			Unwound: []unwound{{Stop: "end of stack"}, {Error: "x"}}, FrameTab: []report.Frame{{PC: 1, Function: "f"}},
			FrameRefs: []byte{2, 0, 16, 0, 16, 1, 0, 48}}},
		{"refs_whole", upMsg{Kind: kResolve, Result: &report.Process{Threads: []report.Thread{{TID: 1}}},
			Unwound: []unwound{{}, {}}, FrameTab: []report.Frame{}, FrameRefs: []byte{1, 5, 2}}},
		// A runtime's frames (kRuntime) for the two threads of the capture.
		{"runtime_frames", upMsg{Kind: kRuntime, RuntimeRead: true, Result: &report.Process{Runtime: &report.Runtime{Name: "python", Version: "3.11.2"},
			Threads:  []report.Thread{{TID: 1, HoldsGIL: true, Frames: []report.Frame{{Kind: "python", Function: "f\x1b[2J", Line: 7}}}, {TID: 2}},
			Warnings: []string{"thread 2: Python frames incomplete"}}}},
		{"runtime_none", upMsg{Kind: kRuntime, NotRuntime: true}},
		// Threading names: one to escape, one past the bound, one not
		// UTF-8.
		{"runtime_names", upMsg{Kind: kRuntime, RuntimeRead: true, Result: &report.Process{Runtime: &report.Runtime{Name: "python", Version: "3.12.1"},
			Threads: []report.Thread{{TID: 1, PythonName: "MainThread"}, {TID: 2, PythonName: "w\x1b[2J\u65e5"}}}}},
		{"runtime_names_long", upMsg{Kind: kRuntime, RuntimeRead: true, Result: &report.Process{Runtime: &report.Runtime{Name: "python", Version: "3.12.1"},
			Threads: []report.Thread{{TID: 1, PythonName: strings.Repeat("x", pyruntime.MaxName+1)}, {TID: 2, PythonName: "\xff\xfe"}}}}},
		// The owners of the RLocks the two threads wait for (kRuntimeLocks):
		// each other; then one that is no thread of the process.
		{"runtime_locks", upMsg{Kind: kRuntimeLocks, WaitTab: []*report.WaitingFor{
			{Kind: report.WaitPythonRLock, Address: 0x7f00, OwnerTID: ptrTo(2), Note: "held 1 time(s)"},
			{Kind: report.WaitPythonRLock, Address: 0x7f40, OwnerTID: ptrTo(1), Note: "held 1 time(s)"}}, WaitOf: []int{0, 1}}},
		{"runtime_locks_stranger", upMsg{Kind: kRuntimeLocks, WaitTab: []*report.WaitingFor{
			{Kind: report.WaitPythonRLock, Address: 0x7f00, OwnerTID: ptrTo(99)}}, WaitOf: []int{0, -1}}},
		{"cacheput", upMsg{Kind: kCachePut, Key: &diskcache.Key{Kind: "symbols", BuildID: "ab"}, Data: []byte("a\x00c")}},
		{"key_valid", upMsg{Kind: kCacheGet, Len: 1 << 20, Key: &diskcache.Key{Kind: "symbols", BuildID: "0123abcd",
			Size: 10, Dev: 1, Ino: 2, Ctime: 3, Part: "v1 debug=none alt=none"}}},
		{"key_escape", upMsg{Kind: kCachePut, Key: &diskcache.Key{Kind: "../ns-u0-g0/x", BuildID: "../../etc/passwd"}, Data: []byte("probe")}},
		{"key_bad", upMsg{Kind: kCachePut, Key: &diskcache.Key{Kind: "symbols", BuildID: "00", Size: -5, Part: "a\x00b"}}},
	}
}

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the committed fuzz seeds in testdata/fuzz")

// TestUpdateUpSeeds rewrites testdata/fuzz/{FuzzRecvUp,FuzzCacheKey} from
// upSeeds when run with -update-seeds.
func TestUpdateUpSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("rewrites the seed corpus only with -update-seeds")
	}
	for _, fuzz := range []string{"FuzzRecvUp", "FuzzCacheKey"} {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, seed := range upSeeds() {
			if fuzz == "FuzzCacheKey" && seed.m.Key == nil {
				continue
			}
			b := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(encodeValue(nil, &seed.m))))
			if err := os.WriteFile(filepath.Join(dir, seed.name), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
