package otlp

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name    string
		flag    string
		headers []string
		env     map[string]string
		url     string
		hdr     map[string]string
		timeout time.Duration
		err     string
	}{
		{name: "base", flag: "http://collector:4318", url: "http://collector:4318/v1development/profiles"},
		{name: "base slash", flag: "https://collector:4318/", url: "https://collector:4318/v1development/profiles"},
		{name: "full path kept", flag: "http://gw/otlp/v1development/profiles", url: "http://gw/otlp/v1development/profiles"},
		{name: "env base", env: map[string]string{EnvEndpoint: "http://c:4318/prefix"}, url: "http://c:4318/prefix/v1development/profiles"},
		{name: "env profiles as is", env: map[string]string{EnvEndpoint: "http://c:1", EnvProfilesEndpoint: "http://p:2/x"}, url: "http://p:2/x"},
		{name: "flag over env", flag: "http://f:3", env: map[string]string{EnvProfilesEndpoint: "http://p:2/x"}, url: "http://f:3/v1development/profiles"},
		{name: "no endpoint", err: "no OTLP endpoint"},
		{name: "not http", flag: "ftp://collector:4318", err: "not an http:// or https:// URL"},
		{name: "no scheme", flag: "collector:4318", err: "not an http:// or https:// URL"},
		{name: "grpc scheme", flag: "grpc://collector:4317", err: "not an http:// or https:// URL"},
		{name: "no host", flag: "http:///v1", err: "has no host"},
		{name: "credentials", flag: "http://u:secret@c:4318", err: "credentials"},
		{name: "garbage", flag: "http://c:43 18", err: "not a URL"},
		{
			name: "headers", flag: "http://c", headers: []string{"X-Scope-OrgID=team=a", "Authorization=Bearer flag"},
			env: map[string]string{EnvHeaders: "Authorization=Bearer%20env, api-key = k%2C1 ,", EnvProfilesHeaders: "api-key=k2"},
			url: "http://c/v1development/profiles",
			hdr: map[string]string{"X-Scope-OrgID": "team=a", "Authorization": "Bearer flag", "api-key": "k2"},
		},
		{name: "env header value decoded", flag: "http://c", env: map[string]string{EnvHeaders: "a=b%2Cc"}, url: "http://c/v1development/profiles", hdr: map[string]string{"a": "b,c"}},
		{name: "bad flag header", flag: "http://c", headers: []string{"novalue"}, err: "want NAME=VALUE"},
		{name: "header with newline", flag: "http://c", headers: []string{"a=b\r\nX-Evil: 1"}, err: "want NAME=VALUE"},
		{name: "bad header name", flag: "http://c", headers: []string{"a b=c"}, err: "want NAME=VALUE"},
		{name: "bad env header", flag: "http://c", env: map[string]string{EnvHeaders: "=x"}, err: EnvHeaders},
		{name: "timeout", flag: "http://c", env: map[string]string{EnvTimeout: "2500", EnvProfilesTimeout: "700"}, url: "http://c/v1development/profiles", timeout: 700 * time.Millisecond},
		{name: "bad timeout", flag: "http://c", env: map[string]string{EnvTimeout: "10s"}, err: "want milliseconds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Resolve(c.flag, c.headers, env(c.env))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.URL != c.url {
				t.Errorf("URL %q, want %q", s.URL, c.url)
			}
			if c.hdr != nil && len(s.Headers) != len(c.hdr) {
				t.Errorf("headers %v, want %v", s.Headers, c.hdr)
			}
			for k, v := range c.hdr {
				if s.Headers[k] != v {
					t.Errorf("header %s = %q, want %q (all: %v)", k, s.Headers[k], v, s.Headers)
				}
			}
			if s.RequestTimeout != c.timeout {
				t.Errorf("timeout %v, want %v", s.RequestTimeout, c.timeout)
			}
		})
	}
}
