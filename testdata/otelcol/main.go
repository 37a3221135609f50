// Command otelcol is the OpenTelemetry Collector stackshot's tests send
// profiles to: the real OTLP receiver (profiles behind the
// service.profilesSupport feature gate), the debug exporter, and "oracle",
// an exporter that appends every batch it receives to a file as one line of
// pprofile JSON, for the tests to read back.
//
// It is a module of its own so the product does not carry the Collector's
// dependencies; the tests build it with `go build`.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/exporter/xexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "stackshot's test collector", Version: "test"},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "otelcol:", err)
		os.Exit(1)
	}
}

func factories() (otelcol.Factories, error) {
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](debugexporter.NewFactory(), oracleFactory())
	return f, err
}

// oracleConfig names the file the oracle appends to.
type oracleConfig struct {
	Path string `mapstructure:"path"`
}

func oracleFactory() exporter.Factory {
	return xexporter.NewFactory(component.MustNewType("oracle"),
		func() component.Config { return &oracleConfig{} },
		xexporter.WithProfiles(func(_ context.Context, _ exporter.Settings, cfg component.Config) (xexporter.Profiles, error) {
			c := cfg.(*oracleConfig)
			if c.Path == "" {
				return nil, fmt.Errorf("oracle: path is required")
			}
			return &oracle{path: c.Path}, nil
		}, component.StabilityLevelDevelopment))
}

// oracle writes what it receives, one JSON line per batch.
type oracle struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func (o *oracle) Start(context.Context, component.Host) error {
	f, err := os.OpenFile(o.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	o.f = f
	return err
}

func (o *oracle) Shutdown(context.Context) error {
	if o.f == nil {
		return nil
	}
	return o.f.Close()
}

func (o *oracle) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (o *oracle) ConsumeProfiles(_ context.Context, pd pprofile.Profiles) error {
	var m pprofile.JSONMarshaler
	b, err := m.MarshalProfiles(pd)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return o.f.Sync()
}
