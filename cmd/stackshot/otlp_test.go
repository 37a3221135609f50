//go:build linux

package main

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"stackshot/internal/testutil"
)

// gnuBuildID reads a binary's GNU build id with readelf (an independent
// answer).
func gnuBuildID(t testing.TB, bin string) string {
	t.Helper()
	out, err := exec.Command(testutil.Need(t, "readelf"), "-n", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s has no GNU build id:\n%s", bin, out)
	}
	return string(m[1])
}

func attrString(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.AsString()
	}
	return "<absent>"
}

// profileIDs lists the ids of every profile in the batches.
func profileIDs(batches []pprofile.Profiles) []string {
	var ids []string
	for _, pd := range batches {
		for _, rp := range pd.ResourceProfiles().All() {
			for _, sp := range rp.ScopeProfiles().All() {
				for _, p := range sp.Profiles().All() {
					ids = append(ids, p.ProfileID().String())
				}
			}
		}
	}
	return ids
}

// TestRecordOTLPCollector drives the real Collector: a record of the hot
// target arrives with its stacks, shares, resource and build ids; with the
// collector down, two records spool at once; with it back, the next
// record sends the spooled profiles first, each exactly once.
func TestRecordOTLPCollector(t *testing.T) {
	bin := buildHot(t)
	addr := testutil.FreeAddr(t)
	out := filepath.Join(t.TempDir(), "received.jsonl")
	col := testutil.StartCollector(t, addr, out)
	tg := testutil.Start(t, bin)
	spool := filepath.Join(t.TempDir(), "spool")
	folded := filepath.Join(t.TempDir(), "p.folded")

	so, se, code := runSS(t, "record", "-F", "199", "-d", "3s", "-o", folded, "--otlp", col.URL,
		"--service", "hot-svc", "--spool", spool, fmt.Sprint(tg.PID))
	if code != 0 || so != "" {
		t.Fatalf("exit %d, stdout %q: %s", code, so, se)
	}
	batches := col.Received(t)
	if len(batches) != 1 {
		t.Fatalf("the collector received %d batches, want 1", len(batches))
	}
	pd := batches[0]
	if pd.ResourceProfiles().Len() != 1 {
		t.Fatalf("%d resources", pd.ResourceProfiles().Len())
	}
	rp := pd.ResourceProfiles().At(0)
	host, _ := os.Hostname()
	id := gnuBuildID(t, bin)
	for k, v := range map[string]string{
		"host.name": host, "process.pid": fmt.Sprint(tg.PID), "service.name": "hot-svc",
		"process.executable.name": filepath.Base(bin), "process.executable.build_id.gnu": id,
	} {
		if got := attrString(rp.Resource().Attributes(), k); got != v {
			t.Errorf("resource %s = %q, want %q", k, got, v)
		}
	}
	dict := pd.Dictionary()
	str := func(i int32) string { return dict.StringTable().At(int(i)) }
	// The executable's mapping carries its build id.
	found := false
	for _, m := range dict.MappingTable().All() {
		if str(m.FilenameStrindex()) != bin {
			continue
		}
		for _, ai := range m.AttributeIndices().All() {
			kv := dict.AttributeTable().At(int(ai))
			if str(kv.KeyStrindex()) == "process.executable.build_id.gnu" && kv.Value().Str() == id {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no mapping of %s with build id %s", bin, id)
	}
	// Stacks and shares: hot_a has 75% of hot_a+hot_b, under worker; the
	// samples are the ones -o wrote.
	prof := rp.ScopeProfiles().At(0).Profiles().At(0)
	if str(prof.SampleType().TypeStrindex()) != "samples" || prof.Period() != int64(1e9)/199 {
		t.Errorf("sample type %s, period %d", str(prof.SampleType().TypeStrindex()), prof.Period())
	}
	stacks, err := testutil.OTLPStacks(dict, prof)
	if err != nil {
		t.Fatal(err)
	}
	var a, b, total int64
	for st, n := range stacks {
		total += n
		switch {
		case strings.HasPrefix(st, "burn_until <- hot_a <- worker") || strings.HasPrefix(st, "hot_a <- worker"):
			a += n
		case strings.HasPrefix(st, "burn_until <- hot_b <- worker") || strings.HasPrefix(st, "hot_b <- worker"):
			b += n
		}
	}
	// The collector got exactly the stacks -o wrote (the share itself is
	// the sampler's, checked by TestRecordFoldedShares; a loaded machine
	// moves it, not the encoding).
	fb, _ := os.ReadFile(folded)
	want := map[string]int64{}
	for _, l := range strings.Split(strings.TrimSpace(string(fb)), "\n") {
		i := strings.LastIndexByte(l, ' ')
		n, err := strconv.ParseInt(l[i+1:], 10, 64)
		if i < 0 || err != nil {
			t.Fatalf("folded line %q", l)
		}
		fr := strings.Split(l[:i], ";")[1:] // (the process's root frame: a resource attribute in OTLP)
		slices.Reverse(fr)
		want[strings.Join(fr, " <- ")] += n
	}
	if !maps.Equal(stacks, want) {
		t.Errorf("the collector's stacks differ from what -o wrote:\n got  %v\n want %v", stacks, want)
	}
	if a+b < 100 || a <= b {
		t.Errorf("hot_a %d, hot_b %d samples: want hot_a's three times hot_b's", a, b)
	}
	t.Logf("otlp: hot_a %d, hot_b %d of %d", a, b, total)

	// The collector down: two records of two targets spool at once.
	col.Stop()
	tg2 := testutil.Start(t, bin)
	var wg sync.WaitGroup
	errs := make([]string, 2)
	for i, pid := range []int{tg.PID, tg2.PID} {
		wg.Go(func() {
			_, se, code := runSS(t, "record", "-F", "99", "-d", "1s", "--timeout", "2s", "--otlp", col.URL,
				"--spool", spool, fmt.Sprint(pid))
			if code != 0 || !strings.Contains(se, "warning: the profile was not delivered") || !strings.Contains(se, "kept in "+spool) ||
				!strings.Contains(se, "unique stacks, kept in the spool for "+col.URL) {
				errs[i] = fmt.Sprintf("spooling record %d: exit %d: %s", i, code, se)
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 2 {
		t.Fatalf("the spool holds %d entries, want the 2 profiles", len(ents))
	}

	// Back: the next record sends the two spooled first, then its own.
	col = testutil.StartCollector(t, addr, out)
	_, se, code = runSS(t, "record", "-F", "99", "-d", "1s", "--otlp", col.URL, "--spool", spool, fmt.Sprint(tg2.PID))
	if code != 0 || !strings.Contains(se, "sent 2 spooled profiles") || !strings.Contains(se, "unique stacks, sent to "+col.URL) {
		t.Fatalf("exit %d: %s", code, se)
	}
	batches = col.Received(t)
	if len(batches) != 4 {
		t.Fatalf("the collector received %d batches in all, want 4 (1 + 2 spooled + 1)", len(batches))
	}
	pids := map[string]int{}
	for _, pd := range batches[1:] {
		pids[attrString(pd.ResourceProfiles().At(0).Resource().Attributes(), "process.pid")]++
	}
	if pids[fmt.Sprint(tg.PID)] != 1 || pids[fmt.Sprint(tg2.PID)] != 2 {
		t.Errorf("after the restart, profiles by pid %v: want 1 of %d and 2 of %d", pids, tg.PID, tg2.PID)
	}
	ids := profileIDs(batches)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("profile %s received twice", id)
		}
		seen[id] = true
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 0 {
		t.Errorf("the spool still holds %d entries", len(ents))
	}
}

// TestRecordOTLPBadInput: refusals before anything is recorded (exit 2),
// a collector that answers HTML (spooled, exit 0; without a spool, exit 1).
func TestRecordOTLPBadInput(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	pid := fmt.Sprint(tg.PID)
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(dir, "link")
	os.Symlink(real, link)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--otlp", "ftp://collector:4318"}, "not an http:// or https:// URL"},
		{[]string{"--otlp", "collector:4318"}, "not an http:// or https:// URL"},
		{[]string{"--spool", real}, "--spool needs --otlp URL"},
		{[]string{"--otlp", "http://127.0.0.1:1", "--spool", link}, "is a symbolic link"},
		{[]string{"--otlp", "http://127.0.0.1:1", "--otlp-header", "novalue"}, "want NAME=VALUE"},
	} {
		args := append(append([]string{"record", "-d", "1s"}, c.args...), pid)
		_, se, code := runSS(t, args...)
		if code != 2 || !strings.Contains(se, c.want) || strings.Count(strings.TrimSpace(se), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line saying %q", c.args, code, se, c.want)
		}
	}

	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>Welcome to nginx!</body></html>")
	}))
	defer html.Close()
	_, se, code := runSS(t, "record", "-d", "500ms", "--otlp", html.URL, "--spool", real, pid)
	if code != 0 || !strings.Contains(se, "an HTML page, not OTLP") || !strings.Contains(se, "kept in") {
		t.Errorf("HTML answer with a spool: exit %d: %s", code, se)
	}
	_, se, code = runSS(t, "record", "-d", "500ms", "--otlp", html.URL, pid)
	if code != 1 || !strings.Contains(se, "an HTML page, not OTLP") || !strings.Contains(se, "give --spool DIR") {
		t.Errorf("HTML answer without a spool: exit %d: %s", code, se)
	}
}
