module stackshot

go 1.26.0

require golang.org/x/sys v0.50.0

require (
	github.com/chzyer/readline v1.5.1 // indirect
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b // indirect
	github.com/ianlancetaylor/demangle v0.0.0-20260724033716-83e58baca724 // indirect
	github.com/spf13/pflag v1.1.0 // indirect
	github.com/ulikunitz/xz v0.5.17 // indirect
)
