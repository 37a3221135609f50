//go:build linux

package otlp

import (
	"bytes"
	"compress/gzip"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// TestRealCollectorAnswers: how the real Collector answers is what the
// sender's reading of answers was written for: bad data is a 400 whose
// message is shown and that is not retried; the wrong path is a 404, kept.
func TestRealCollectorAnswers(t *testing.T) {
	col := testutil.StartCollector(t, testutil.FreeAddr(t), filepath.Join(t.TempDir(), "out.jsonl"))
	var garbage bytes.Buffer
	zw := gzip.NewWriter(&garbage)
	zw.Write([]byte{0x0a, 0xff, 0xff, 0x01, 0x02}) // a field longer than the message
	zw.Close()
	set, err := Resolve(col.URL, nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s := mustSender(t, set, "", nil)
	err = s.Send(deadline(t, 10*time.Second), garbage.Bytes())
	var e *Error
	if !errors.As(err, &e) || e.Kind != Rejected || !strings.Contains(e.Msg, "400 Bad Request: ") || strings.Contains(e.Msg, "attempts") {
		t.Errorf("garbage: %v; want a Rejected 400 with the collector's message, sent once", err)
	}
	t.Logf("the collector said: %v", err)

	set.URL = col.URL + "/v1/profiles"
	err = mustSender(t, set, "", nil).Send(deadline(t, 10*time.Second), body(t, 1))
	if !errors.As(err, &e) || e.Kind != Keep || !strings.Contains(e.Msg, "404") {
		t.Errorf("wrong path: %v; want a Keep 404", err)
	}
	if got := col.Received(t); len(got) != 0 {
		t.Errorf("the collector exported %d batches", len(got))
	}
}
