// Package otlp delivers profiles to an OpenTelemetry Collector over
// OTLP/HTTP (protobuf, gzip), and loses none: what the collector does not
// take is retried within a deadline, then kept in a spool directory and
// sent first by the next run.
package otlp

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ProfilesPath is where an OTLP/HTTP receiver takes profiles while the
// signal is in development (the Collector answers 404 on /v1/profiles).
const ProfilesPath = "/v1development/profiles"

// The standard exporter environment variables (the OpenTelemetry SDK
// specification's), the profiles-specific one first.
const (
	EnvEndpoint         = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvProfilesEndpoint = "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"
	EnvHeaders          = "OTEL_EXPORTER_OTLP_HEADERS"
	EnvProfilesHeaders  = "OTEL_EXPORTER_OTLP_PROFILES_HEADERS"
	EnvTimeout          = "OTEL_EXPORTER_OTLP_TIMEOUT"
	EnvProfilesTimeout  = "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT"
	EnvCertificate      = "OTEL_EXPORTER_OTLP_CERTIFICATE"
	EnvClientCert       = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
	EnvClientKey        = "OTEL_EXPORTER_OTLP_CLIENT_KEY"
)

// Settings is where and how to send.
type Settings struct {
	URL     string            // the full URL profiles are posted to
	Headers map[string]string // request headers (canonical names)
	// RequestTimeout bounds one request (the environment's timeout);
	// zero means only the overall deadline does.
	RequestTimeout time.Duration
	// CAFile is a PEM file of the certificates that may sign an https
	// collector's (instead of the system's); ClientCert and ClientKey a
	// client certificate for mutual TLS.
	CAFile, ClientCert, ClientKey string
}

// Resolve turns the command line and the environment into Settings.
//
// endpoint is --otlp's value: a base URL (no path, or "/") gets
// ProfilesPath appended, a URL with a path is used as it is; when empty,
// OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT (as it is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL: ProfilesPath appended) is used.
// Headers come from OTEL_EXPORTER_OTLP_HEADERS, then
// OTEL_EXPORTER_OTLP_PROFILES_HEADERS, then flagHeaders ("K=V" each), a
// later one replacing an earlier one of the same name. The timeout is
// OTEL_EXPORTER_OTLP_(PROFILES_)TIMEOUT, in milliseconds; TLS files come
// from OTEL_EXPORTER_OTLP_(PROFILES_)CERTIFICATE, _CLIENT_CERTIFICATE and
// _CLIENT_KEY.
func Resolve(endpoint string, flagHeaders []string, getenv func(string) string) (Settings, error) {
	var s Settings
	raw, base := endpoint, true
	if raw == "" {
		if raw = getenv(EnvProfilesEndpoint); raw != "" {
			base = false
		} else if raw = getenv(EnvEndpoint); raw == "" {
			return s, fmt.Errorf("no OTLP endpoint (give --otlp URL or set %s)", EnvEndpoint)
		}
	}
	u, err := checkURL(raw)
	if err != nil {
		return s, err
	}
	if base && (endpoint == "" || u.Path == "" || u.Path == "/") {
		u.Path = strings.TrimSuffix(u.Path, "/") + ProfilesPath
		u.RawPath = ""
	}
	s.URL = u.String()

	s.Headers = map[string]string{}
	for _, env := range []string{EnvHeaders, EnvProfilesHeaders} {
		if err := parseEnvHeaders(s.Headers, env, getenv(env)); err != nil {
			return s, err
		}
	}
	for _, h := range flagHeaders {
		k, v, ok := strings.Cut(h, "=")
		k = strings.TrimSpace(k)
		if !ok || !validHeaderName(k) || !validHeaderValue(v) {
			return s, fmt.Errorf("--otlp-header %q: want NAME=VALUE, a header name and a value without control characters", h)
		}
		s.Headers[k] = v
	}

	for _, env := range []string{EnvTimeout, EnvProfilesTimeout} {
		if v := strings.TrimSpace(getenv(env)); v != "" {
			ms, err := strconv.ParseUint(v, 10, 31)
			if err != nil {
				return s, fmt.Errorf("%s=%q: want milliseconds", env, v)
			}
			s.RequestTimeout = time.Duration(ms) * time.Millisecond
		}
	}
	prof := func(env string) string {
		if v := getenv(strings.Replace(env, "OTLP_", "OTLP_PROFILES_", 1)); v != "" {
			return v
		}
		return getenv(env)
	}
	s.CAFile, s.ClientCert, s.ClientKey = prof(EnvCertificate), prof(EnvClientCert), prof(EnvClientKey)
	if (s.ClientCert == "") != (s.ClientKey == "") {
		return s, fmt.Errorf("%s and %s go together (give both or neither)", EnvClientCert, EnvClientKey)
	}
	return s, nil
}

// checkURL accepts an http or https URL with a host and nothing that
// would be lost or misread (user info goes in a header, not the URL).
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("OTLP endpoint %q is not a URL (%v)", raw, unwrapURL(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("OTLP endpoint %q is not an http:// or https:// URL (OTLP/HTTP, e.g. http://collector:4318)", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("OTLP endpoint %q has no host (e.g. http://collector:4318)", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("OTLP endpoint %q has credentials in it (pass them as --otlp-header Authorization=...)", u.Redacted())
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("OTLP endpoint %q has a #fragment", raw)
	}
	return u, nil
}

func unwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// parseEnvHeaders reads the W3C-baggage-like list "k1=v1,k2=v2" the
// specification gives the headers variables, values percent-encoded.
func parseEnvHeaders(into map[string]string, env, v string) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	for _, item := range strings.Split(v, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, val, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if !ok || err != nil || !validHeaderName(k) || !validHeaderValue(dec) {
			return fmt.Errorf("%s: %q is not NAME=VALUE (values percent-encoded)", env, strings.TrimSpace(k))
		}
		into[k] = dec
	}
	return nil
}

// validHeaderName is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
