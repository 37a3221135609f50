# stackshot — see README.md.
GO      ?= go
BIN     := bin/stackshot
CC      ?= gcc
SHELL   := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build test demo bench fuzz-smoke vet clean setup-demo setup-test docs install

PREFIX  ?= /usr/local
DESTDIR ?=

all: build

# CGO_ENABLED=0: nothing in stackshot needs cgo (only pflag's import of net
# would link it), and a static binary starts faster: about 2 ms less CPU
# per one-off dump of a small process (perf stat, 100 runs each).
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/stackshot

# The tests build their C/C++/Rust/Go targets from testdata/ themselves and
# attach to them for real: run as root (or with CAP_SYS_PTRACE). Packages
# run one at a time (-p 1): their targets spin and time their own stops,
# and two packages' loads on two cores would only make both slower.
# The symbolizer's concurrent loading runs under the race detector first.
# The output is go test's own, then the list of skipped tests with their
# reasons (internal/testsum); STACKSHOT_STRICT=1 (CI) turns a missing tool
# into a failure.
test: setup-test
	@$(MAKE) --no-print-directory build
	$(GO) vet ./...
	$(GO) test -race -count=1 -run 'Concurrent' ./symtab/
	set -o pipefail; $(GO) test -json -count=1 -p 1 -timeout 60m ./... | $(GO) run ./internal/testsum

# Start the bundled multi-threaded demo target, dump it, stop it.
demo: setup-demo
	@$(MAKE) --no-print-directory build
	@./scripts/demo.sh $(BIN)

# What make demo and make test need, installed when missing (as root) or
# named (otherwise): scripts/setup.sh. Nothing is installed, and no
# package index fetched, when all is present.
setup-demo:
	@./scripts/setup.sh demo
setup-test:
	@./scripts/setup.sh test

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 ./cmd/stackshot/ ./ptrace/
	$(GO) test -run '^$$' -bench . -count 1 ./unwind/ ./symtab/

# A short run of every fuzz target (each for FUZZTIME).
FUZZTIME ?= 10s
fuzz-smoke:
	@./scripts/fuzz-smoke.sh $(FUZZTIME)

vet:
	$(GO) vet ./...

# The man page and the bash and zsh completion, made from the help the
# binary prints (internal/gendocs; its test checks they are current).
docs: build
	$(GO) run ./internal/gendocs $(BIN) docs

# The binary, its man page and completions, where man, bash-completion and
# zsh look for them (PREFIX=/usr/local; DESTDIR for packaging).
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/stackshot
	install -D -m 0644 docs/stackshot.1 $(DESTDIR)$(PREFIX)/share/man/man1/stackshot.1
	install -D -m 0644 docs/completion/stackshot.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/stackshot
	install -D -m 0644 docs/completion/_stackshot $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_stackshot

clean:
	rm -rf bin testdata/build
