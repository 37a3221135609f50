package capfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCapfile feeds Decode arbitrary bytes, seeded with testdata/*.cap (a real capture
// of sleep and small hand-made files): it must
// return an error or a capture, never panic.
func FuzzCapfile(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.cap"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := Decode(bytes.NewReader(data))
		if err == nil && cf.Format != Format {
			t.Errorf("accepted format %q", cf.Format)
		}
	})
}
