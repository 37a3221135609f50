//go:build linux

package otlp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"stackshot/output"
	"time"
)

// Flags are what a command was asked to export with (its --otlp flags).
type Flags struct {
	Endpoint   string   // the collector's URL; "env": OTEL_EXPORTER_OTLP_ENDPOINT
	Headers    []string // NAME=VALUE, added to OTEL_EXPORTER_OTLP_HEADERS
	Spool      string   // where undelivered profiles are kept; "": nowhere
	SpoolFiles int      // most profiles kept there
	SpoolMB    int      // most MiB kept there
	Service    string   // service.name of the profiles; "": each process's name
}

// Exporter sends a command's profile to a collector, and keeps it in the
// spool when the collector does not take it.
type Exporter struct {
	Sender  *Sender
	spool   *Spool
	dir     string
	service string
	version string
}

// Open checks the flags, the endpoint and the spool before anything is
// recorded; nil when no endpoint is given (changed names the flags given:
// the others need --otlp). version is stackshot's. Its errors are bad
// usage, in the contract's words.
func Open(f Flags, version string, getenv func(string) string, changed func(flag string) bool, warn func(string)) (*Exporter, error) {
	if f.Endpoint == "" {
		for _, flag := range []string{"otlp-header", "service", "spool", "spool-max-files", "spool-max-mb"} {
			if changed(flag) {
				return nil, errors.New("--" + flag + " needs --otlp URL")
			}
		}
		return nil, nil
	}
	endpoint := f.Endpoint
	if endpoint == "env" {
		endpoint = ""
	}
	set, err := Resolve(endpoint, f.Headers, getenv)
	if err != nil {
		return nil, err
	}
	e := &Exporter{dir: f.Spool, service: f.Service, version: version}
	if e.Sender, err = NewSender(set, "stackshot/"+version, warn); err != nil {
		return nil, err
	}
	if f.Spool != "" {
		if f.SpoolFiles <= 0 || f.SpoolMB <= 0 {
			return nil, errors.New("--spool-max-files and --spool-max-mb must be positive")
		}
		if e.spool, err = OpenSpool(f.Spool, f.SpoolFiles, int64(f.SpoolMB)<<20, warn); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Export sends prof within timeout (see Deliver), or spools it, and tells
// say (nil: nothing) the spooled profiles sent on the way, and warn the
// spool file an undelivered one is kept in (a warning even a quiet run
// gives: cron must learn that delivery failed). went says, for the
// summary, what became of it ("sent to URL", "kept in the spool for URL",
// "not delivered to URL"); the error (exit 1) is for a profile neither
// sent nor spooled. A nil Exporter exports nothing (went "").
func (e *Exporter) Export(prof *output.Profile, timeout time.Duration, say, warn func(string)) (went string, err error) {
	if e == nil {
		return "", nil
	}
	notSent := "not delivered to " + e.Sender.URL
	host, _ := os.Hostname()
	pd, err := output.ToOTLP(prof, output.OTLPOptions{Host: host, Service: e.service, Version: e.version})
	if err != nil {
		return notSent, fmt.Errorf("cannot build the OTLP profile (%v)", err)
	}
	body, err := Encode(pd)
	if err != nil {
		return notSent, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := Deliver(ctx, e.Sender, e.spool, body)
	if err != nil {
		return notSent, fmt.Errorf("the profile was not delivered: %v", err)
	}
	went = "sent to " + e.Sender.URL
	if out.Spooled != "" {
		went = "kept in the spool for " + e.Sender.URL
	}
	if out.Flushed > 0 && say != nil {
		say(fmt.Sprintf("sent %d spooled profiles to %s", out.Flushed, e.Sender.URL))
	}
	if out.Spooled != "" && warn != nil {
		warn(fmt.Sprintf("warning: the profile was not delivered (%v); kept in %s: the next run with --spool %s sends it", out.Reason, out.Spooled, e.dir))
	}
	return went, nil
}
