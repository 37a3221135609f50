package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"
)

// Collector is a real OpenTelemetry Collector (testdata/otelcol, a module
// of its own built from the Collector's released components) running on a
// loopback port: its OTLP/HTTP receiver takes profiles, its "oracle"
// exporter appends each batch to Out as one line of pprofile JSON.
type Collector struct {
	URL  string // the OTLP/HTTP base URL, http://127.0.0.1:PORT
	Addr string
	Out  string
	Log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the collector has exited
}

// CollectorBinary builds the test collector once (an Artifact: kept in
// CacheDir across runs; the first build fetches the Collector's modules
// through the Go module proxy and takes minutes).
func CollectorBinary(t testing.TB) string {
	t.Helper()
	Need(t, "go")
	return Artifact(t, "otelcol", Testdata("otelcol"),
		[]string{"go", "-C", "$SRC", "build", "-buildvcs=false", "-trimpath", "-o", "$OUT", "."})
}

// FreeAddr returns a loopback address nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// StartCollector starts the collector on addr writing to out (both kept
// by the caller across a restart), waits until it answers, and stops it
// when the test ends.
func StartCollector(t testing.TB, addr, out string) *Collector {
	t.Helper()
	bin := CollectorBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	conf := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %q
exporters:
  oracle:
    path: %q
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [oracle]
`, addr, out)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Collector{URL: "http://" + addr, Addr: addr, Out: out, Log: filepath.Join(dir, "collector.log"), done: make(chan struct{})}
	logf, err := os.Create(c.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	c.cmd = exec.Command(bin, "--config", cfg, "--feature-gates=+service.profilesSupport")
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting the collector: %v", err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	t.Cleanup(c.Stop)
	// Ready when the receiver answers an empty export.
	end := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Post(c.URL+"/v1development/profiles", "application/x-protobuf", bytes.NewReader(nil))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return c
			}
		}
		if time.Now().After(end) || c.exited() {
			b, _ := os.ReadFile(c.Log)
			c.Stop()
			t.Fatalf("the collector did not answer on %s (last: %v %v); its log:\n%s", addr, err, resp, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Collector) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Stop shuts the collector down (SIGTERM by pid: it flushes and exits)
// and waits for it; SIGKILL after 20 s.
func (c *Collector) Stop() {
	if c.exited() {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// Received reads every batch the collector has exported so far.
func (c *Collector) Received(t testing.TB) []pprofile.Profiles {
	t.Helper()
	f, err := os.Open(c.Out)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []pprofile.Profiles
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		var u pprofile.JSONUnmarshaler
		pd, err := u.UnmarshalProfiles(sc.Bytes())
		if err != nil {
			t.Fatalf("the collector's output %s: %v", c.Out, err)
		}
		out = append(out, pd)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
