module stackshot

go 1.26.0

require (
	github.com/elastic/go-seccomp-bpf v1.6.0
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/ianlancetaylor/demangle v0.0.0-20260724033716-83e58baca724
	github.com/spf13/pflag v1.1.0
	github.com/ulikunitz/xz v0.5.17
	golang.org/x/sys v0.50.0
)

require golang.org/x/net v0.41.0 // indirect
