package symtab

import (
	"bytes"
	"math/rand"
	"os"
	"testing"
	"time"
)

func TestDbgFuzzSlow(t *testing.T) {
	var seeds [][]byte
	fuzzSeedBinaries2(t, func(p string) { b, _ := os.ReadFile(p); seeds = append(seeds, b) })
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 3000; i++ {
		b := append([]byte(nil), seeds[i%len(seeds)]...)
		for k := 0; k < 1+r.Intn(8); k++ {
			b[r.Intn(len(b))] = byte(r.Intn(256))
		}
		st := time.Now()
		BuildIDFromMemory(bytes.NewReader(b), 0)
		m, err := New(Options{}).ModuleFromImage(b, "x")
		if err == nil {
			exercise(m)
		}
		if d := time.Since(st); d > 200*time.Millisecond {
			t.Logf("slow %d: %v", i, d)
			os.WriteFile("/tmp/slow.bin", b, 0644)
			return
		}
	}
}
func fuzzSeedBinaries2(t *testing.T, add func(string)) {
	for _, n := range []string{"tiny"} {
		add(artifact(t, "fuzzseed-"+n, []string{"gcc", "-O1", "-g", "-nostdlib", "-static", "-Wl,--build-id", "-o", "$OUT", "$SRC/tiny.c"}))
	}
}
