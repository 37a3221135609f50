//go:build linux

package sandbox

import (
	"encoding/base64"
	"reflect"
	"strings"
	"unicode/utf8"
)

// JSON carries only valid UTF-8: encoding/json turns each invalid byte of a
// string into U+FFFD. Names the target controls may hold any bytes, and the
// parent escapes them as \xNN when it prints them, so the child's report
// must reach it byte for byte. Before the report is encoded, every string
// that is not valid UTF-8 (or begins with the marker) becomes the marker
// and its bytes in base64; the parent turns them back.

// rawMarker begins an encoded string: U+FFFF, a noncharacter no name uses.
const rawMarker = "\uffff"

// maxWalkDepth bounds the walk (the report's types nest a few levels).
const maxWalkDepth = 16

func encodeRaw(s string) string {
	if utf8.ValidString(s) && !strings.HasPrefix(s, rawMarker) {
		return s
	}
	return rawMarker + base64.StdEncoding.EncodeToString([]byte(s))
}

func decodeRaw(s string) string {
	rest, ok := strings.CutPrefix(s, rawMarker)
	if !ok {
		return s
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return s // not ours: shown as sent, escaped like any name
	}
	return string(b)
}

// mapStrings replaces, in place, every string reachable from v (a pointer)
// through struct fields, pointers, slices and arrays by f of it.
func mapStrings(v any, f func(string) string) {
	walkStrings(reflect.ValueOf(v), f, 0)
}

func walkStrings(v reflect.Value, f func(string) string, depth int) {
	if depth > maxWalkDepth {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkStrings(v.Elem(), f, depth+1)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				walkStrings(v.Field(i), f, depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes travel as base64 already
		}
		if k := v.Type().Elem().Kind(); k >= reflect.Int && k <= reflect.Float64 {
			return // numbers only (record's walks: thousands a tick)
		}
		for i := 0; i < v.Len(); i++ {
			walkStrings(v.Index(i), f, depth+1)
		}
	case reflect.String:
		if v.CanSet() {
			if s := v.String(); s != "" {
				v.SetString(f(s))
			}
		}
	}
}
