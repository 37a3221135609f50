//go:build linux

package sandbox

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"stackshot/procmaps"
	"stackshot/report"
)

// fill sets every exported field reachable from v to a value that is not
// its zero, a slice or map to one element: a field the codec lost would
// come back zero.
func fill(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 12, 2, 1, 2, 3, 4, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-7 - int64(depth))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(200 + uint64(depth))
		if v.Type().Size() == 8 {
			v.SetUint(1<<63 | 5)
		}
	case reflect.Float32, reflect.Float64:
		v.SetFloat(2.5)
	case reflect.String:
		v.SetString("s\xff\x00é")
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(s.Index(1), depth+1)
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	}
}

// Every field of what goes down comes back as it was, down to empty
// slices and pointers to zero values (gob made those nil); a frame cut
// anywhere, or with a byte more, is refused, never a panic.
func TestCodecRoundTrip(t *testing.T) {
	var m downMsg
	fill(reflect.ValueOf(&m).Elem(), 0)
	m.Report = encodeReport(func() *report.Process {
		var p report.Process
		fill(reflect.ValueOf(&p).Elem(), 0)
		return &p
	}())
	m.Kept, m.Proc.Threads[0].Sched = []int{}, new(procmaps.SchedStat)
	b := encodeValue(nil, &m)
	var got downMsg
	if err := decodeInto(b, &got, 0); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, m)
	}
	if got.Kept == nil || got.Proc.Threads[0].Sched == nil {
		t.Error("an empty slice or a pointer to a zero value came back nil")
	}
	rp, err := decodeReport(got.Report)
	var want report.Process
	fill(reflect.ValueOf(&want).Elem(), 0)
	if err != nil || !reflect.DeepEqual(*rp, want) {
		t.Errorf("report: %v\n%+v\nwant\n%+v", err, rp, want)
	}
	for n := 0; n < len(b); n++ {
		var x downMsg
		if decodeInto(b[:n], &x, 0) == nil {
			t.Fatalf("a frame cut at %d of %d bytes was decoded", n, len(b))
		}
	}
	var x downMsg
	if decodeInto(append(b, 0), &x, 0) == nil {
		t.Error("a frame with a byte more was decoded")
	}
}

// Every field of what comes up, through the socket, comes back as it was,
// strings of any bytes included.
func TestUpRoundTrip(t *testing.T) {
	var m upMsg
	fill(reflect.ValueOf(&m).Elem(), 0)
	fds := socketPair(t)
	go sendUp(fds[1], &m)
	got, err := recvUp(fds[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, m) {
		t.Errorf("decoded\n%+v\nwant\n%+v", *got, m)
	}
}

// padded encodes to a byte and takes 4 KB decoded.
type padded struct {
	X bool
	_ [4096]byte
}

// A short frame cannot make the parent allocate more than a few times its
// size: a count of large values in a few bytes each is refused, and so is
// an answer past the limit the caller sets (the child's own memory).
func TestDecodeAllocationBound(t *testing.T) {
	n := 1 << 16 // 256 MiB decoded, from 64 KiB
	bomb := append(binary.AppendUvarint(nil, uint64(n)+1), make([]byte, n)...)
	var p []padded
	if err := decodeInto(bomb, &p, 0); err == nil {
		t.Fatalf("decoded %d values of %d bytes from %d bytes", len(p), unsafe.Sizeof(padded{}), len(bomb))
	}
	small := append(binary.AppendUvarint(nil, 64+1), make([]byte, 64)...)
	if err := decodeInto(small, &p, 0); err != nil || len(p) != 64 {
		t.Fatalf("64 values: %v, %d", err, len(p))
	}
	// A real answer decodes, within its own bound but not past a limit.
	frames := make([]report.Frame, 20000)
	for i := range frames {
		frames[i] = report.Frame{PC: uint64(i), Function: "main", Module: "/usr/bin/x", Kind: "user", Method: "cfi"}
	}
	real := encodeValue(nil, &upMsg{Kind: kResolve, FrameTab: frames})
	var m upMsg
	if err := decodeInto(real, &m, 0); err != nil || len(m.FrameTab) != len(frames) {
		t.Fatalf("a real answer: %v", err)
	}
	if err := decodeInto(real, &m, int64(len(real))); err == nil {
		t.Error("decoded past the limit")
	}
}
