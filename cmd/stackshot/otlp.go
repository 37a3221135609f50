//go:build linux

package main

import (
	"os"
	"time"

	"github.com/spf13/pflag"

	"stackshot/internal/cli"
	"stackshot/otlp"
	"stackshot/output"
)

// otlpFlags are record's flags for sending the profile to an
// OpenTelemetry Collector (otlp.Exporter).
type otlpFlags struct {
	otlp.Flags
	fs  *pflag.FlagSet
	exp *otlp.Exporter // nil: no --otlp
}

func addOTLPFlags(fs *pflag.FlagSet) *otlpFlags {
	o := &otlpFlags{fs: fs}
	fs.StringVar(&o.Endpoint, "otlp", "", "also send the profile to an OpenTelemetry Collector at `URL` (OTLP/HTTP, e.g. http://collector:4318; \"env\": OTEL_EXPORTER_OTLP_ENDPOINT)")
	fs.StringArrayVar(&o.Headers, "otlp-header", nil, "`NAME=VALUE` header sent to the collector (repeatable; adds to OTEL_EXPORTER_OTLP_HEADERS)")
	fs.StringVar(&o.Service, "service", "", "service.name of the profile (default: the process's name)")
	fs.StringVar(&o.Spool, "spool", "", "keep profiles the collector did not take in `DIR`; the next run sends them first")
	fs.IntVar(&o.SpoolFiles, "spool-max-files", otlp.DefaultSpoolFiles, "most profiles kept in the spool (the oldest go first)")
	fs.IntVar(&o.SpoolMB, "spool-max-mb", otlp.DefaultSpoolBytes>>20, "most MiB kept in the spool (the oldest go first)")
	return o
}

func (o *otlpFlags) enabled() bool { return o.Endpoint != "" }

// prepare checks the flags, the endpoint and the spool before anything is
// recorded.
func (o *otlpFlags) prepare(quiet bool) error {
	warn := func(msg string) {
		if !quiet {
			cli.Say("warning: " + msg)
		}
	}
	exp, err := otlp.Open(o.Flags, version, os.Getenv, o.fs.Changed, warn)
	if err != nil {
		return cli.UsageError{Msg: err.Error()}
	}
	o.exp = exp
	return nil
}

// deliver sends prof within timeout, or spools it; went says what became
// of it ("" without --otlp). A spooled profile is a warning -q keeps.
func (o *otlpFlags) deliver(prof *output.Profile, timeout time.Duration, quiet bool) (went string, err error) {
	return o.exp.Export(prof, timeout, map[bool]func(string){false: cli.Say}[quiet], cli.Say)
}
