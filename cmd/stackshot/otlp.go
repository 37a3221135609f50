//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"stackshot/internal/cli"
	"stackshot/otlp"
	"stackshot/output"
)

// otlpFlags are record's flags for sending the profile to an
// OpenTelemetry Collector.
type otlpFlags struct {
	endpoint   string
	headers    []string
	service    string
	spool      string
	spoolFiles int
	spoolMB    int
	fs         *pflag.FlagSet

	sender *otlp.Sender
	sp     *otlp.Spool
}

func addOTLPFlags(fs *pflag.FlagSet) *otlpFlags {
	o := &otlpFlags{fs: fs}
	fs.StringVar(&o.endpoint, "otlp", "", "also send the profile to an OpenTelemetry Collector at URL (OTLP/HTTP, e.g. http://collector:4318; \"env\": OTEL_EXPORTER_OTLP_ENDPOINT)")
	fs.StringArrayVar(&o.headers, "otlp-header", nil, "NAME=VALUE header sent to the collector (repeatable; adds to OTEL_EXPORTER_OTLP_HEADERS)")
	fs.StringVar(&o.service, "service", "", "service.name of the profile (default: the process's name)")
	fs.StringVar(&o.spool, "spool", "", "keep profiles the collector did not take in DIR; the next run sends them first")
	fs.IntVar(&o.spoolFiles, "spool-max-files", otlp.DefaultSpoolFiles, "most profiles kept in the spool (the oldest go first)")
	fs.IntVar(&o.spoolMB, "spool-max-mb", otlp.DefaultSpoolBytes>>20, "most MiB kept in the spool (the oldest go first)")
	return o
}

func (o *otlpFlags) enabled() bool { return o.endpoint != "" }

// prepare checks the flags, the endpoint and the spool before anything is
// recorded.
func (o *otlpFlags) prepare(quiet bool) error {
	if !o.enabled() {
		for _, f := range []string{"otlp-header", "service", "spool", "spool-max-files", "spool-max-mb"} {
			if o.fs.Changed(f) {
				return cli.UsageError{Msg: "--" + f + " needs --otlp URL"}
			}
		}
		return nil
	}
	endpoint := o.endpoint
	if endpoint == "env" {
		endpoint = ""
	}
	set, err := otlp.Resolve(endpoint, o.headers, os.Getenv)
	if err != nil {
		return cli.UsageError{Msg: err.Error()}
	}
	warn := func(msg string) {
		if !quiet {
			printErr("stackshot: warning: %s", msg)
		}
	}
	if o.sender, err = otlp.NewSender(set, "stackshot/"+version, warn); err != nil {
		return cli.UsageError{Msg: err.Error()}
	}
	if o.spool != "" {
		if o.spoolFiles <= 0 || o.spoolMB <= 0 {
			return cli.UsageError{Msg: "--spool-max-files and --spool-max-mb must be positive"}
		}
		if o.sp, err = otlp.OpenSpool(o.spool, o.spoolFiles, int64(o.spoolMB)<<20, warn); err != nil {
			return cli.UsageError{Msg: err.Error()}
		}
	}
	return nil
}

// where names the destination of a recording for the summary: the file,
// or the collector when there is none.
func (o *otlpFlags) where(path string) string {
	if o.enabled() && (path == "" || path == "-") {
		return o.sender.URL
	}
	return path
}

// deliver sends prof within timeout, or spools it. The error (exit 1) is
// for a profile neither sent nor spooled.
// With verbose, it says how long that took.
func (o *otlpFlags) deliver(prof *output.Profile, timeout time.Duration, quiet, verbose bool) error {
	if !o.enabled() {
		return nil
	}
	began := time.Now()
	host, _ := os.Hostname()
	pd, err := output.ToOTLP(prof, output.OTLPOptions{Host: host, Service: o.service, Version: version})
	if err != nil {
		return fmt.Errorf("cannot build the OTLP profile (%v)", err)
	}
	body, err := otlp.Encode(pd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := otlp.Deliver(ctx, o.sender, o.sp, body)
	if err != nil {
		return fmt.Errorf("the profile was not delivered: %v", err)
	}
	if quiet {
		return nil
	}
	if verbose && out.Sent {
		printErr("stackshot: profile sent to %s in %.1f ms (%d bytes)", o.sender.URL, float64(time.Since(began).Microseconds())/1000, len(body))
	}
	if out.Flushed > 0 {
		printErr("stackshot: sent %d spooled profiles to %s", out.Flushed, o.sender.URL)
	}
	if out.Spooled != "" {
		printErr("stackshot: warning: the profile was not delivered (%v); kept in %s: the next run with --spool %s sends it", out.Reason, out.Spooled, o.spool)
	}
	return nil
}
