//go:build linux

package main

import (
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
	otlp.Flags
	service string
	fs      *pflag.FlagSet
	exp     *otlp.Exporter
}

func addOTLPFlags(fs *pflag.FlagSet) *otlpFlags {
	o := &otlpFlags{fs: fs}
	fs.StringVar(&o.Endpoint, "otlp", "", "also send the profile to an OpenTelemetry Collector at URL (OTLP/HTTP, e.g. http://collector:4318; \"env\": OTEL_EXPORTER_OTLP_ENDPOINT)")
	fs.StringArrayVar(&o.Headers, "otlp-header", nil, "NAME=VALUE header sent to the collector (repeatable; adds to OTEL_EXPORTER_OTLP_HEADERS)")
	fs.StringVar(&o.service, "service", "", "service.name of the profile (default: the process's name)")
	fs.StringVar(&o.Spool, "spool", "", "keep profiles the collector did not take in DIR; the next run sends them first")
	fs.IntVar(&o.SpoolFiles, "spool-max-files", otlp.DefaultSpoolFiles, "most profiles kept in the spool (the oldest go first)")
	fs.IntVar(&o.SpoolMB, "spool-max-mb", otlp.DefaultSpoolBytes>>20, "most MiB kept in the spool (the oldest go first)")
	return o
}

func (o *otlpFlags) enabled() bool { return o.Endpoint != "" }

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
	warn := func(msg string) {
		if !quiet {
			printErr("stackshot: warning: %s", msg)
		}
	}
	exp, err := otlp.Open(o.Flags, "stackshot/"+version, os.Getenv, warn)
	if err != nil {
		return cli.UsageError{Msg: err.Error()}
	}
	o.exp = exp
	return nil
}

// where names the destination of a recording for the summary: the file,
// or the collector when there is none.
func (o *otlpFlags) where(path string) string {
	if o.enabled() && (path == "" || path == "-") {
		return o.exp.Sender.URL
	}
	return path
}

// deliver sends prof within timeout, or spools it (otlp.Exporter.Export).
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
	var say func(string)
	if !quiet {
		say = func(msg string) { printErr("stackshot: %s", msg) }
	}
	return o.exp.Export(body, timeout, began, verbose, say)
}
