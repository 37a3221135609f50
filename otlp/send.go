package otlp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind says what to do with a profile a collector did not take.
type Kind int

const (
	// Retry: try again after a while (connection refused or reset,
	// timeout, 408, 429, 5xx).
	Retry Kind = iota
	// Keep: retrying now will not help but the profile is good; keep it
	// for a later run (401, 403, 404, an answer that is not OTLP).
	Keep
	// Rejected: the collector says the data is bad (400, 413, 422); it
	// would say so again, so it is neither retried nor kept.
	Rejected
)

// Error is a failed send.
type Error struct {
	Kind  Kind
	Msg   string        // what happened, with the collector's own message
	After time.Duration // Retry-After, when the collector gave one
}

func (e *Error) Error() string { return e.Msg }

// Sender posts request bodies (from Encode) to one collector.
type Sender struct {
	Settings
	Client    *http.Client // nil: a client of its own
	UserAgent string
	// Warn reports what was delivered only in part (a partial-success
	// answer naming rejected profiles); nil discards.
	Warn func(msg string)
}

// NewSender returns a Sender for s (the environment's proxy settings
// apply, as for any HTTP client).
func NewSender(s Settings, userAgent string, warn func(string)) (*Sender, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if s.CAFile != "" || s.ClientCert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, fmt.Errorf("cannot read the collector's CA certificates (%v)", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s holds no PEM certificate", s.CAFile)
			}
		}
		if s.ClientCert != "" {
			cert, err := tls.LoadX509KeyPair(s.ClientCert, s.ClientKey)
			if err != nil {
				return nil, fmt.Errorf("cannot load the client certificate (%v)", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		tr.TLSClientConfig = cfg
	}
	return &Sender{Settings: s, UserAgent: userAgent, Warn: warn, Client: &http.Client{Transport: tr}}, nil
}

// Backoff between attempts: from backoffMin, doubling, to backoffMax, each
// with up to 20% jitter so a fleet restarted together does not retry in
// step.
var (
	backoffMin = 200 * time.Millisecond
	backoffMax = 5 * time.Second
)

// Send posts body until the collector takes it, retrying what may pass
// later with backoff (and the collector's Retry-After) until ctx's
// deadline. The error is the last attempt's *Error.
func (s *Sender) Send(ctx context.Context, body []byte) error {
	wait := backoffMin
	for attempt := 1; ; attempt++ {
		err := s.post(ctx, body)
		var e *Error
		if err == nil || !errors.As(err, &e) || e.Kind != Retry {
			return err
		}
		d := wait + rand.N(wait/5+1)
		if e.After > d {
			d = e.After
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			if e.After > 0 {
				e.Msg += fmt.Sprintf("; the collector asked to wait %s, past the deadline", e.After)
			}
			e.Msg += attempts(attempt)
			return e
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			e.Msg += attempts(attempt)
			return e
		case <-t.C:
		}
		wait = min(wait*2, backoffMax)
	}
}

// attempts says how many posts were made: " (1 attempt)", " (3 attempts)".
func attempts(n int) string {
	if n == 1 {
		return " (1 attempt)"
	}
	return fmt.Sprintf(" (%d attempts)", n)
}

// Once posts body once.
func (s *Sender) Once(ctx context.Context, body []byte) error { return s.post(ctx, body) }

func (s *Sender) post(ctx context.Context, body []byte) error {
	if s.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.RequestTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return &Error{Kind: Keep, Msg: fmt.Sprintf("cannot post to %s (%v)", s.URL, err)}
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "gzip")
	if s.UserAgent != "" {
		req.Header.Set("User-Agent", s.UserAgent)
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		// A name that does not exist will not exist in a second either:
		// keep the profile, try no more (a DNS server that did not answer
		// is retried).
		var dns *net.DNSError
		if errors.As(err, &dns) && dns.IsNotFound {
			return &Error{Kind: Keep, Msg: fmt.Sprintf("cannot reach the collector at %s (%v)", s.URL, netReason(err))}
		}
		return &Error{Kind: Retry, Msg: fmt.Sprintf("cannot reach the collector at %s (%v)", s.URL, netReason(err))}
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return s.accepted(ct, ans)
	}
	msg := fmt.Sprintf("the collector at %s answered %s", s.URL, resp.Status)
	if m := answerMessage(ct, ans); m != "" {
		msg += ": " + m
	}
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
		return &Error{Kind: Retry, Msg: msg, After: retryAfter(resp.Header.Get("Retry-After"))}
	case code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge || code == http.StatusUnprocessableEntity:
		return &Error{Kind: Rejected, Msg: msg}
	}
	return &Error{Kind: Keep, Msg: msg}
}

// accepted reads a 2xx answer: OTLP's is protobuf, possibly naming
// rejected profiles; one that is HTML is a proxy or a web page, not a
// collector, and the profile did not arrive.
func (s *Sender) accepted(ct string, ans []byte) error {
	switch ct {
	case "application/x-protobuf", "application/protobuf", "":
		rejected, m, err := partialSuccess(ans)
		if err != nil {
			if ct == "" && looksLikeText(ans) {
				break
			}
			return &Error{Kind: Keep, Msg: fmt.Sprintf("the collector at %s answered with a malformed OTLP response (%v)", s.URL, err)}
		}
		if (rejected != 0 || m != "") && s.Warn != nil {
			s.Warn(fmt.Sprintf("the collector at %s took the profile in part: %d profiles rejected (%s)", s.URL, rejected, clip(m)))
		}
		return nil
	case "application/json":
		// A collector answers JSON to JSON requests only; take the
		// profile as delivered and read what it says anyway.
		if bytes.Contains(ans, []byte("rejected")) && s.Warn != nil {
			s.Warn(fmt.Sprintf("the collector at %s took the profile in part: %s", s.URL, clip(string(ans))))
		}
		return nil
	}
	return &Error{Kind: Keep, Msg: fmt.Sprintf("%s answered %s, not OTLP (is it the collector's OTLP/HTTP endpoint, e.g. http://collector:4318?)", s.URL, kindOf(ct, ans))}
}

// answerMessage is what an error answer says: the google.rpc.Status
// message of an OTLP answer, or the start of a plain-text one.
func answerMessage(ct string, ans []byte) string {
	switch {
	case ct == "application/x-protobuf" || ct == "application/protobuf":
		if m, ok := statusMessage(ans); ok {
			return clip(m)
		}
	case ct == "text/plain" || ct == "application/json" || (ct == "" && looksLikeText(ans)):
		return clip(string(ans))
	}
	if len(ans) > 0 {
		return kindOf(ct, ans)
	}
	return ""
}

func kindOf(ct string, ans []byte) string {
	if ct == "text/html" || bytes.HasPrefix(bytes.TrimSpace(bytes.ToLower(ans[:min(len(ans), 64)])), []byte("<")) {
		return "an HTML page"
	}
	if ct == "" {
		return fmt.Sprintf("%d bytes of no declared type", len(ans))
	}
	return fmt.Sprintf("%d bytes of %s", len(ans), clip(ct))
}

func looksLikeText(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

// clip bounds a message from the collector to one short line.
func clip(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	if len(s) > 300 {
		i := 300
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "..."
	}
	return s
}

// retryAfter reads Retry-After: seconds, or an HTTP date.
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 31); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// netReason drops the *url.Error wrapper, which repeats the method and URL.
func netReason(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if in := ue.Unwrap(); in != nil {
			if errors.Is(in, context.DeadlineExceeded) {
				return errors.New("timed out")
			}
			return in
		}
	}
	return err
}
