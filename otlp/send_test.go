//go:build linux

package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"stackshot/internal/otlppb"
)

// body returns a request body carrying one profile marked n.
func body(t testing.TB, n int64) []byte {
	t.Helper()
	pd := &otlppb.ProfilesData{ResourceProfiles: []*otlppb.ResourceProfiles{{
		Resource:      []otlppb.KeyValue{{Key: "n", Value: otlppb.IntValue(n)}},
		ScopeProfiles: []*otlppb.ScopeProfiles{{Profiles: []*otlppb.Profile{{}}}},
	}}}
	b, err := Encode(pd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// collector is an OTLP/HTTP endpoint of the test's: it decodes what it
// gets as a collector does and answers as answer says.
type collector struct {
	srv    *httptest.Server
	t      testing.TB
	mu     sync.Mutex
	got    []int64 // the n of each profile received
	reqs   int
	times  []time.Time
	header http.Header
	answer func(n int) (status int, header map[string]string, body []byte)
}

func newCollector(t *testing.T, answer func(n int) (int, map[string]string, []byte)) *collector {
	c := &collector{answer: answer, t: t}
	c.srv = httptest.NewServer(c.handler())
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.reqs++
		n := c.reqs
		c.times = append(c.times, time.Now())
		c.header = r.Header.Clone()
		c.mu.Unlock()
		status, hdr, ans := 200, map[string]string{"Content-Type": "application/x-protobuf"}, []byte(nil)
		if c.answer != nil {
			status, hdr, ans = c.answer(n)
		}
		if status == 200 && r.URL.Path == ProfilesPath {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, "not gzip", 400)
				return
			}
			raw, _ := io.ReadAll(zr)
			var u pprofile.ProtoUnmarshaler
			pd, err := u.UnmarshalProfiles(raw)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			v, _ := pd.ResourceProfiles().At(0).Resource().Attributes().Get("n")
			c.mu.Lock()
			c.got = append(c.got, v.Int())
			c.mu.Unlock()
		}
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		w.Write(ans)
	})
}

func (c *collector) sender(warn func(string)) *Sender {
	return mustSender(c.t, Settings{URL: c.srv.URL + ProfilesPath, Headers: map[string]string{"X-Scope-OrgID": "team-a"}}, "stackshot-test", warn)
}

func mustSender(t testing.TB, set Settings, ua string, warn func(string)) *Sender {
	t.Helper()
	s, err := NewSender(set, ua, warn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (c *collector) received() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.got...)
}

// statusBody is a google.rpc.Status with code and message.
func statusBody(code int, msg string) []byte {
	b := []byte{0x08, byte(code), 0x12, byte(len(msg))}
	return append(b, msg...)
}

func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestSendDelivers(t *testing.T) {
	c := newCollector(t, nil)
	if err := c.sender(nil).Send(deadline(t, 5*time.Second), body(t, 7)); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); len(got) != 1 || got[0] != 7 {
		t.Fatalf("received %v", got)
	}
	h := c.header
	if h.Get("Content-Encoding") != "gzip" || h.Get("Content-Type") != "application/x-protobuf" ||
		h.Get("X-Scope-OrgID") != "team-a" || h.Get("User-Agent") != "stackshot-test" {
		t.Errorf("headers %v", h)
	}
}

func TestSendPartialSuccess(t *testing.T) {
	// ExportProfilesServiceResponse{partial_success: {rejected_profiles: 3, error_message: "bad stacks"}}
	ps := append([]byte{0x08, 3, 0x12, 10}, "bad stacks"...)
	ans := append([]byte{0x0a, byte(len(ps))}, ps...)
	c := newCollector(t, func(int) (int, map[string]string, []byte) {
		return 200, map[string]string{"Content-Type": "application/x-protobuf"}, ans
	})
	var warned []string
	err := c.sender(func(m string) { warned = append(warned, m) }).Send(deadline(t, 5*time.Second), body(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "3 profiles rejected (bad stacks)") {
		t.Errorf("warnings %q", warned)
	}
}

func TestSendHTML(t *testing.T) {
	c := newCollector(t, func(int) (int, map[string]string, []byte) {
		return 200, map[string]string{"Content-Type": "text/html; charset=utf-8"}, []byte("<!doctype html><html><body>Sign in</body></html>")
	})
	err := c.sender(nil).Send(deadline(t, 5*time.Second), body(t, 1))
	var e *Error
	if !errors.As(err, &e) || e.Kind != Keep || !strings.Contains(e.Msg, "an HTML page, not OTLP") {
		t.Fatalf("error %v, want a Keep saying the answer is HTML", err)
	}
	if c.reqs != 1 {
		t.Errorf("%d requests: an HTML answer is not retried", c.reqs)
	}
}

func TestSendRejected(t *testing.T) {
	c := newCollector(t, func(int) (int, map[string]string, []byte) {
		return 400, map[string]string{"Content-Type": "application/x-protobuf"}, statusBody(3, "proto: cannot parse invalid wire-format data")
	})
	err := c.sender(nil).Send(deadline(t, 5*time.Second), body(t, 1))
	var e *Error
	if !errors.As(err, &e) || e.Kind != Rejected || !strings.Contains(e.Msg, "400 Bad Request: proto: cannot parse invalid wire-format data") {
		t.Fatalf("error %v, want a Rejected with the collector's message", err)
	}
	if c.reqs != 1 {
		t.Errorf("%d requests: bad data is not retried", c.reqs)
	}
}

func TestSendRetryAfter(t *testing.T) {
	c := newCollector(t, func(n int) (int, map[string]string, []byte) {
		if n == 1 {
			return 429, map[string]string{"Retry-After": "1", "Content-Type": "text/plain"}, []byte("slow down")
		}
		if n == 2 {
			return 503, nil, nil
		}
		return 200, map[string]string{"Content-Type": "application/x-protobuf"}, nil
	})
	if err := c.sender(nil).Send(deadline(t, 10*time.Second), body(t, 5)); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); c.reqs != 3 || len(got) != 1 || got[0] != 5 {
		t.Fatalf("%d requests, received %v", c.reqs, got)
	}
	// The second request came no sooner than the collector asked.
	if gap := c.times[1].Sub(c.times[0]); gap < time.Second {
		t.Errorf("retried after %v, the collector asked for 1s", gap)
	}
}

func TestSendRetryAfterPastDeadline(t *testing.T) {
	c := newCollector(t, func(int) (int, map[string]string, []byte) {
		return 429, map[string]string{"Retry-After": "3600"}, nil
	})
	err := c.sender(nil).Send(deadline(t, 5*time.Second), body(t, 1))
	var e *Error
	if !errors.As(err, &e) || e.Kind != Retry || !strings.Contains(e.Msg, "asked to wait 1h0m0s, past the deadline") {
		t.Fatalf("error %v", err)
	}
	if c.reqs != 1 {
		t.Errorf("%d requests", c.reqs)
	}
}

// deadPort is a loopback port nothing listens on.
func deadPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestSendRefusedRetries(t *testing.T) {
	s := mustSender(t, Settings{URL: "http://" + deadPort(t) + ProfilesPath}, "", nil)
	err := s.Send(deadline(t, 1500*time.Millisecond), body(t, 1))
	var e *Error
	if !errors.As(err, &e) || e.Kind != Retry || !strings.Contains(e.Msg, "connection refused") {
		t.Fatalf("error %v", err)
	}
	// 200ms, 400ms, 800ms of backoff fit 1.5s at most 3 times.
	if !strings.Contains(e.Msg, " attempts)") || strings.Contains(e.Msg, "(1 attempts)") {
		t.Errorf("error %v: want several attempts", err)
	}
}

func TestDeliverOutcomes(t *testing.T) {
	dir := t.TempDir()
	sp, err := OpenSpool(dir, 10, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Refused: spooled.
	dead := mustSender(t, Settings{URL: "http://" + deadPort(t) + ProfilesPath}, "", nil)
	out, err := Deliver(deadline(t, 500*time.Millisecond), dead, sp, body(t, 1))
	if err != nil || out.Sent || out.Spooled == "" || out.Reason == nil {
		t.Fatalf("refused: %+v %v", out, err)
	}
	// Refused without a spool: an error.
	if _, err := Deliver(deadline(t, 300*time.Millisecond), dead, nil, body(t, 2)); err == nil || !strings.Contains(err.Error(), "--spool") {
		t.Fatalf("no spool: %v", err)
	}
	// Rejected: not spooled, an error.
	bad := newCollector(t, func(int) (int, map[string]string, []byte) { return 400, nil, []byte("bad profile") })
	sp2, err := OpenSpool(t.TempDir(), 10, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Deliver(deadline(t, 5*time.Second), bad.sender(nil), sp2, body(t, 3)); err == nil || !strings.Contains(err.Error(), "not kept") {
		t.Fatalf("rejected: %v", err)
	}
	if sp2.Pending() != 0 {
		t.Errorf("a rejected profile was spooled")
	}
	if sp.Pending() != 1 {
		t.Fatalf("%d spooled, want 1", sp.Pending())
	}
	// A collector up: the spooled one first, then the new one.
	c := newCollector(t, nil)
	out, err = Deliver(deadline(t, 5*time.Second), c.sender(nil), sp, body(t, 4))
	if err != nil || !out.Sent || out.Flushed != 1 {
		t.Fatalf("up: %+v %v", out, err)
	}
	if got := c.received(); len(got) != 2 || got[0] != 1 || got[1] != 4 {
		t.Errorf("received %v, want [1 4]", got)
	}
	if sp.Pending() != 0 {
		t.Errorf("%d still spooled", sp.Pending())
	}
}

func TestRetryAfterParse(t *testing.T) {
	if d := retryAfter("7"); d != 7*time.Second {
		t.Error(d)
	}
	if d := retryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); d < 59*time.Minute || d > time.Hour {
		t.Error(d)
	}
	for _, v := range []string{"", "-1", "soon", "99999999999"} {
		if d := retryAfter(v); d != 0 {
			t.Errorf("%q: %v", v, d)
		}
	}
}

func TestAnswerParse(t *testing.T) {
	if r, m, err := partialSuccess(nil); r != 0 || m != "" || err != nil {
		t.Error("empty answer", r, m, err)
	}
	if _, _, err := partialSuccess([]byte{0x0a, 0x05, 0x08}); err == nil {
		t.Error("truncated answer accepted")
	}
	if m, ok := statusMessage(statusBody(3, "oops")); !ok || m != "oops" {
		t.Error(m, ok)
	}
	if !bytes.Contains([]byte(clip(strings.Repeat("é", 400))), []byte("...")) {
		t.Error("long message not clipped")
	}
}

// TestSendTLS: an https collector whose certificate is signed by the CA
// OTEL_EXPORTER_OTLP_CERTIFICATE names; without it the system's CAs
// refuse it.
func TestSendTLS(t *testing.T) {
	c := &collector{t: t}
	c.srv = httptest.NewTLSServer(c.handler())
	defer c.srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := Resolve(c.srv.URL, nil, env(map[string]string{EnvCertificate: ca}))
	if err != nil {
		t.Fatal(err)
	}
	if err := mustSender(t, set, "", nil).Send(deadline(t, 5*time.Second), body(t, 9)); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); len(got) != 1 || got[0] != 9 {
		t.Fatalf("received %v", got)
	}
	set.CAFile = ""
	err = mustSender(t, set, "", nil).Once(deadline(t, 5*time.Second), body(t, 10))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("an unknown CA: %v", err)
	}
	if _, err := NewSender(Settings{URL: c.srv.URL, CAFile: filepath.Join(t.TempDir(), "none.pem")}, "", nil); err == nil {
		t.Error("a missing CA file was accepted")
	}
	if _, err := Resolve(c.srv.URL, nil, env(map[string]string{EnvClientCert: ca})); err == nil {
		t.Error("a client certificate without its key was accepted")
	}
}

// nxdomain serves DNS on a local UDP port, answering every question
// "no such name" (NXDOMAIN), and counts the questions.
func nxdomain(t *testing.T) (*net.Resolver, *atomic.Int32) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var asked atomic.Int32
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			end := 12 // the question: its name's labels, a 0, type and class
			for end < n && q[end] != 0 {
				end += int(q[end]) + 1
			}
			if n < 12 || end+5 > n {
				continue
			}
			asked.Add(1)
			ans := append([]byte{q[0], q[1], 0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 0}, q[12:end+5]...)
			pc.WriteTo(ans, from)
		}
	}()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	return r, &asked
}

// A collector's name that does not exist is not retried: the profile is
// kept at once (Keep), not after six tries in the backoff.
func TestSendNoSuchHostFailsAtOnce(t *testing.T) {
	r, asked := nxdomain(t)
	s := mustSender(t, Settings{URL: "http://collector.invalid.:4318" + ProfilesPath}, "", nil)
	s.Client = &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Resolver: r}).DialContext}}
	err := s.Send(deadline(t, time.Minute), body(t, 1))
	var e *Error
	if !errors.As(err, &e) || e.Kind != Keep || !strings.Contains(e.Msg, "no such host") {
		t.Fatalf("error %v (%#v), want Keep: no such host", err, e)
	}
	if n := asked.Load(); n == 0 || n > 2 {
		t.Errorf("%d DNS questions, want one lookup (A and AAAA at most): no retry", n)
	}
}
