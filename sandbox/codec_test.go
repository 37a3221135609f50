//go:build linux

package sandbox

import (
	"reflect"
	"testing"
	"time"

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
	if err := decodeInto(b, &got); err != nil {
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
		if decodeInto(b[:n], &x) == nil {
			t.Fatalf("a frame cut at %d of %d bytes was decoded", n, len(b))
		}
	}
	var x downMsg
	if decodeInto(append(b, 0), &x) == nil {
		t.Error("a frame with a byte more was decoded")
	}
}

// FuzzDownFrame feeds the child's reader of its parent's frames with
// anything: it returns a message or an error, never a panic, and
// allocates no more than the frame's size allows.
func FuzzDownFrame(f *testing.F) {
	var m downMsg
	fill(reflect.ValueOf(&m).Elem(), 4)
	w := newDownWriter()
	w.buf = encodeValue(append(w.buf[:0], 0, 0, 0, 0), &m)
	f.Add(append(w.buf, 0, 0, 0, 0))
	f.Add([]byte{5, 0, 0, 0, 2, 9, 'r', 'e', 's', 'o', 'l', 'v', 'e'})
	f.Add([]byte{3, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 4 {
			n := uint32(len(b) - 4)
			b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		}
		newDownReader().decode(b)
	})
}
