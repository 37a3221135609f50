//go:build linux

package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// The spool is swapped for a symbolic link while a record runs (the attack
// of a user who owns the spool's parent directory): the link points at
// another user's 0700 directory holding two 0600 spool-named profiles, one
// of that user's and one of root's. The collector fails, so the run lists,
// spools and trims: through the directory it opened, never the link. Both
// files are neither sent nor removed nor renamed, nothing is written beside
// them, and the run's profile is kept in the directory it opened (moved
// aside by the attacker).
func TestRecordSpoolSwappedForLink(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	os.Chmod(base, 0o755)
	parent := filepath.Join(base, "attacker")
	victim := filepath.Join(base, "victim")
	for _, d := range []string{parent, victim} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(parent, 0o755)
	if err := os.Chown(parent, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	secrets := map[string][]byte{}
	for i, uid := range []int{1000, 0} {
		name := fmt.Sprintf("%020d-1-%02d.otlp.gz", i+1, i)
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		fmt.Fprintf(zw, "secret of uid %d", uid)
		zw.Close()
		path := filepath.Join(victim, name)
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chown(path, uid, uid)
		secrets[name] = b.Bytes()
	}
	os.Chown(victim, 1000, 1000)

	var mu sync.Mutex
	var bodies [][]byte
	var swapped atomic.Bool
	var early atomic.Bool
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		if !swapped.Load() {
			early.Store(true)
		}
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer col.Close()

	tg := testutil.Start(t, buildHot(t))
	spool := filepath.Join(parent, "spool")
	cmd := exec.Command(stackshotBin, "record", "-d", "4s", "--timeout", "9s", "--otlp", col.URL,
		"--spool", spool, "--spool-max-files", "1", fmt.Sprint(tg.PID))
	var se strings.Builder
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The spool appears (OpenSpool made it) before the recording begins:
	// the attacker moves it aside and puts the link in its place.
	aside := filepath.Join(parent, "moved")
	for i := 0; ; i++ {
		if st, err := os.Lstat(spool); err == nil && st.IsDir() {
			break
		}
		if i > 3000 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the spool never appeared: %s", se.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.Rename(spool, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, spool); err != nil {
		t.Fatal(err)
	}
	syscall.Lchown(spool, 65534, 65534)
	swapped.Store(true)
	err := cmd.Wait()
	if early.Load() {
		t.Fatalf("the collector was asked before the spool was swapped (the machine was too slow for a 4 s recording): %s", se.String())
	}
	if err != nil || !strings.Contains(se.String(), "kept in "+spool+"/") {
		t.Fatalf("record: %v: %s", err, se.String())
	}

	ents, _ := os.ReadDir(victim)
	if len(ents) != len(secrets) {
		t.Errorf("the victim's directory holds %d entries, want its %d files", len(ents), len(secrets))
	}
	for name, want := range secrets {
		got, err := os.ReadFile(filepath.Join(victim, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("the victim's %s was removed, renamed or changed: %v", name, err)
		}
	}
	mu.Lock()
	for _, b := range bodies {
		for name, s := range secrets {
			if bytes.Equal(b, s) {
				t.Errorf("the victim's %s was sent to the collector", name)
			}
		}
	}
	asked := len(bodies)
	mu.Unlock()
	if asked == 0 {
		t.Errorf("the collector was never asked")
	}
	kept, _ := os.ReadDir(aside)
	if len(kept) != 1 || !strings.HasSuffix(kept[0].Name(), ".otlp.gz") {
		t.Errorf("the directory the run opened holds %v, want its one profile", kept)
	}
	assertUntouched(t, tg.PID, false)
}
