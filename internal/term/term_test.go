package term

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain name", "plain name"},
		{"std::vector<int>::push_back", "std::vector<int>::push_back"},
		{"\x1b[2J\x1b[31mX", `\x1b[2J\x1b[31mX`},
		{"a\nb\tc\rd\x00e\x7f", `a\x0ab\x09c\x0dd\x00e\x7f`},
		{"bad\xffutf8\xc3", `bad\xffutf8\xc3`},
		{"é ü 日本", "é ü 日本"},
		{"csi\u009b31m", `csi\u009b31m`},
		{"trojan\u202esource\u2066", `trojan\u202esource\u2066`},
		{`back\slash`, `back\slash`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEscapeText(t *testing.T) {
	in := "Thread 1 \"\x1b]0;owned\x07\":\n\t#0 f\u202e\n"
	want := "Thread 1 \"\\x1b]0;owned\\x07\":\n\t#0 f\\u202e\n"
	if got := string(EscapeText([]byte(in))); got != want {
		t.Errorf("EscapeText = %q, want %q", got, want)
	}
}

// FuzzEscape: whatever goes in, what comes out is valid UTF-8 with no
// character a terminal acts on, and clean input is returned unchanged.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "main", "\x1b[2J", "\xff\xfe", "\u009b", "\u202e", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Escape(%q) = %q: invalid UTF-8", s, out)
		}
		for _, r := range out {
			if Unsafe(r) {
				t.Fatalf("Escape(%q) = %q keeps %U", s, out, r)
			}
		}
		if clean(s, false) && out != s {
			t.Fatalf("clean %q changed to %q", s, out)
		}
		text := string(EscapeText([]byte(s)))
		for _, r := range text {
			if Unsafe(r) && r != '\n' && r != '\t' {
				t.Fatalf("EscapeText(%q) = %q keeps %U", s, text, r)
			}
		}
	})
}

func TestEscapeJSON(t *testing.T) {
	in := []byte("{\n  \"comm\": \"a\x7fb\u009bc\u202ed\u00e9\\u001b\"\n}\n")
	got := EscapeJSON(in)
	want := "{\n  \"comm\": \"a\\u007fb\\u009bc\\u202ed\u00e9\\u001b\"\n}\n"
	if string(got) != want {
		t.Errorf("EscapeJSON = %q, want %q", got, want)
	}
	var v, w map[string]string
	if err := json.Unmarshal(in, &v); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &w); err != nil || v["comm"] != w["comm"] {
		t.Errorf("EscapeJSON changed the value: %q -> %q (%v)", v["comm"], w["comm"], err)
	}
}

// The whole-report pass costs a scan of clean text (the usual case) and
// no allocation.
func BenchmarkEscapeTextClean(b *testing.B) {
	line := []byte("#5   0x00007f742be4e2ec in __GI___libc_read at ./io/../sysdeps/unix/sysv/linux/read.c:24 (libc.so.6+0xf82ec)\n")
	var doc []byte
	for len(doc) < 512<<10 {
		doc = append(doc, line...)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		EscapeText(doc)
	}
}

// A deep recursion's report: short lines, a newline in every sixth word.
func BenchmarkEscapeTextDeep(b *testing.B) {
	line := []byte("#8   0x000055f93239e1bd in rec (deeptgt+0x11bd)\n")
	var doc []byte
	for range 1000 {
		doc = append(doc, line...)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		EscapeText(doc)
	}
}

// cleanByByte is clean's byte-by-byte definition, which its word-at-a-time
// scan must agree with.
func cleanByByte(s string, layout bool) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 {
			return cleanRunes(s[i:], layout)
		} else if (c < 0x20 || c == 0x7f) && !(layout && (c == '\n' || c == '\t')) {
			return false
		}
	}
	return true
}

// Every byte value, at every position of texts of 1 to 24 bytes (so in
// every lane of a word and in the bytes after the last whole word), in
// plain ASCII and beside the neighbours that bound the tests ('\x1f',
// ' ', '~', DEL): the word scan finds what the byte loop finds.
func TestCleanWordScan(t *testing.T) {
	for n := 1; n <= 24; n++ {
		for _, fill := range []byte{'a', ' ', '~', '\n'} {
			for pos := 0; pos < n; pos++ {
				for c := 0; c < 256; c++ {
					b := make([]byte, n)
					for i := range b {
						b[i] = fill
					}
					b[pos] = byte(c)
					for _, layout := range []bool{false, true} {
						if got, want := clean(string(b), layout), cleanByByte(string(b), layout); got != want {
							t.Fatalf("clean(%q, %v) = %v, byte by byte %v", b, layout, got, want)
						}
					}
				}
			}
		}
	}
	if !clean("#0   0x00007f742be4e2ec in read (libc.so.6+0xf82ec)", false) || clean("#0   0x00007f742be4e2ec in r\x7fad", false) {
		t.Fatal("a frame line misjudged")
	}
}
