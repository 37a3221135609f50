module stackshot

go 1.26.0

require golang.org/x/sys v0.50.0

require (
	github.com/ianlancetaylor/demangle v0.0.0-20260724033716-83e58baca724 // indirect
	github.com/spf13/pflag v1.1.0 // indirect
	github.com/ulikunitz/xz v0.5.17 // indirect
)
