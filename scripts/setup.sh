#!/bin/bash
# Set-up for 'make demo' and 'make test' (and .ci/run): installs what this
# machine lacks, and nothing when everything is present (no package index
# update then).
#
#   scripts/setup.sh demo   the Go toolchain go.mod asks for, and gcc
#   scripts/setup.sh test   that, and every package the tests drive
#
# Debian 12 and Ubuntu 24.04, as root. Not root: it installs nothing and
# says what is missing (the Go toolchain and gcc are required; a tool the
# tests use that is missing makes its tests skip, or fail under
# STACKSHOT_STRICT=1).
#
# Go: the machine's go when it is at least go.mod's version. Otherwise the
# distribution's Go (Debian golang-1.19-go, Ubuntu golang-go), too old to
# build stackshot itself, fetches the release as the golang.org/toolchain
# module, the way the go command switches toolchains; it goes to
# /usr/local/go, with go and gofmt linked into /usr/local/bin.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-demo}
case $what in
demo | test) ;;
*)
	echo "setup: unknown set-up '$what' (want demo or test)" >&2
	exit 2
	;;
esac

say() { echo "setup: $*" >&2; }
# (servers and debootstrap live in sbin, which a user's PATH may lack)
PATH=$PATH:/usr/sbin:/sbin

# The release installed when the machine's Go is too old: the newest patch
# release of go.mod's series that CI tests (never older than go.mod's).
GO_INSTALL=1.26.8
GO_NEED=$(sed -n 's/^toolchain go//p; s/^go \([0-9.]*\)$/\1/p' go.mod | sort -V | tail -1)
if [ "$(printf '%s\n' "$GO_NEED" "$GO_INSTALL" | sort -V | head -1)" != "$GO_NEED" ]; then
	GO_INSTALL=$GO_NEED
fi

# Packages by the command that shows each is present (a command found on
# PATH, however it was installed, is enough), then packages without one
# command, checked with dpkg.
demo_cmds=(gcc:gcc)
demo_pkgs=(libc6-dev)
# For make test. Compilers for the targets; binutils for independent
# answers (readelf, addr2line, objcopy, nm, strip); xz for MiniDebugInfo;
# unshare and setpriv for namespaces and other users; gdb and elfutils
# (eu-stack) for cross-checks; lld for a linker variant; dwz for
# dwz-shared debug files; rustc, python3, node and java for real-world
# targets; perf for the profiler comparison; age for a Go binary built by
# others; debuginfod for its tests; the aarch64 cross tools and qemu for
# the arm64 unwinder; debootstrap for the bare-root check; stress-ng for
# load; redis, nginx, ip and ps for real servers; man and zsh for the
# man page and completion tests.
test_cmds=(
	g++:g++ make:make git:git readelf:binutils addr2line:binutils objcopy:binutils
	nm:binutils strip:binutils xz:xz-utils unshare:util-linux setpriv:util-linux
	gdb:gdb gcore:gdb eu-stack:elfutils ld.lld:lld dwz:dwz python3:python3
	node:nodejs java:default-jdk-headless perf:linux-perf age:age
	debuginfod:debuginfod debuginfod-find:debuginfod rustc:rustc
	python3.11-dbg:python3.11-dbg qemu-aarch64-static:qemu-user-static
	aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu aarch64-linux-gnu-objdump:binutils-aarch64-linux-gnu
	gdb-multiarch:gdb-multiarch debootstrap:debootstrap stress-ng:stress-ng
	redis-server:redis-server nginx:nginx-light ip:iproute2 ps:procps pgrep:procps
	man:man-db groff:groff-base zsh:zsh ss:iproute2 python3.11-config:python3.11-dev
)
# (libpython3.11's static link for the embedded-interpreter test needs
# expat's and zlib's too)
test_pkgs=(libc6-dbg libc6-dev-arm64-cross ca-certificates libexpat1-dev zlib1g-dev)

missing=()
want_cmds() {
	local e
	for e in "$@"; do
		command -v "${e%%:*}" >/dev/null 2>&1 || missing+=("${e#*:}")
	done
}
want_pkgs() {
	local p
	for p in "$@"; do
		[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
	done
}

os_id=$(. /etc/os-release 2>/dev/null && echo "${ID:-}")
boot_pkg=golang-1.19-go # Debian's Go, able to fetch a module
[ "$os_id" = ubuntu ] && boot_pkg=golang-go

# go_version prints the version of go $1 (go1.26.8), never switching.
go_version() { GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null || true; }
older() { [ "$(printf '%s\n' "go$GO_NEED" "$1" | sort -V | head -1)" != "go$GO_NEED" ]; }

have_go=$(command -v go || true)
go_ok=false
if [ -n "$have_go" ] && ! older "$(go_version "$have_go")"; then
	go_ok=true
elif [ -x /usr/local/go/bin/go ] && ! older "$(go_version /usr/local/go/bin/go)"; then
	go_ok=link # installed before, not on PATH
elif [ "$(id -u)" != 0 ] && [ -n "$have_go" ] && ! [ "$(printf '%s\n' go1.21 "$(go_version "$have_go")" | sort -V | head -1)" != go1.21 ]; then
	go_ok=switch # go 1.21 or later fetches the release go.mod names itself
	say "$(go_version "$have_go") is older than $GO_NEED: the go command will fetch go$GO_NEED itself when it builds"
fi

want_cmds "${demo_cmds[@]}"
want_pkgs "${demo_pkgs[@]}"
required=${#missing[@]} # (these and Go are required; the rest only for tests)
if [ "$what" = test ]; then
	want_cmds "${test_cmds[@]}"
	want_pkgs "${test_pkgs[@]}"
	# The tests build targets with Debian's Go 1.19 too.
	[ "$os_id" = debian ] && [ ! -x /usr/lib/go-1.19/bin/go ] && missing+=(golang-1.19-go)
fi
if [ "$go_ok" = false ]; then
	missing+=("$boot_pkg" ca-certificates)
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u | grep . || true)

if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" != 0 ]; then
	if [ "$go_ok" = false ]; then
		v=$([ -n "$have_go" ] && go_version "$have_go")
		say "stackshot needs Go $GO_NEED or later (this machine has ${v:-no go}): install it from the Go project's releases, or run this as root ('sudo make $what') to have it installed"
	fi
	say "missing packages: ${missing[*]} (install them: sudo apt-get install ${missing[*]}; or run 'sudo make $what')"
	if [ "$go_ok" = false ] || [ "$required" -gt 0 ]; then
		exit 1
	fi
	say "going on: the tests that need them skip (STACKSHOT_STRICT=1 makes them fail)"
	missing=()
fi

if [ ${#missing[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	say "installing ${missing[*]}"
	apt-get update -qq
	# A package this distribution does not have (linux-perf, python3.11-dbg
	# on Ubuntu) is named and left out; its tests skip.
	avail=()
	for p in "${missing[@]}"; do
		if apt-cache show "$p" >/dev/null 2>&1; then avail+=("$p"); else say "not available here, left out: $p"; fi
	done
	apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=900 -o Dpkg::Use-Pty=0 "${avail[@]}" >/dev/null
fi

if [ "$go_ok" = false ]; then
	boot=$(command -v go || ls -d /usr/lib/go-*/bin/go 2>/dev/null | sort -V | tail -1 || true)
	if [ -z "$boot" ]; then
		say "no go command after installing $boot_pkg; install Go $GO_NEED or later by hand"
		exit 1
	fi
	case $(uname -m) in
	x86_64) arch=amd64 ;;
	aarch64) arch=arm64 ;;
	*)
		say "no Go release for $(uname -m) here; install Go $GO_NEED or later by hand"
		exit 1
		;;
	esac
	mod="golang.org/toolchain@v0.0.1-go$GO_INSTALL.linux-$arch"
	say "Go $(go_version "$boot") is older than $GO_NEED: fetching go$GO_INSTALL with it into /usr/local/go"
	tmp=$(mktemp -d)
	trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
	(cd "$tmp" && export GOFLAGS=-mod=mod GOPATH="$tmp/gopath" GOTOOLCHAIN=local GOCACHE="$tmp/cache" &&
		"$boot" mod init boot >/dev/null 2>&1 && "$boot" mod download "$mod" >/dev/null)
	rm -rf /usr/local/go
	cp -r "$tmp/gopath/pkg/mod/$mod" /usr/local/go
	chmod -R u+w /usr/local/go
	chmod +x /usr/local/go/bin/* /usr/local/go/pkg/tool/*/*
	go_ok=link
fi

if [ "$go_ok" = link ] && [ "$(id -u)" != 0 ]; then
	say "Go $GO_NEED is in /usr/local/go but not on PATH: add /usr/local/go/bin to PATH"
	exit 1
elif [ "$go_ok" = link ]; then
	# Put the toolchain on PATH where a shell finds it before the
	# distribution's older go; a go already in /usr/local/bin that is not
	# a link is someone's own, and stays.
	for t in go gofmt; do
		if [ ! -e "/usr/local/bin/$t" ] || [ -L "/usr/local/bin/$t" ]; then
			ln -sf "/usr/local/go/bin/$t" "/usr/local/bin/$t"
		fi
	done
	got=$(command -v go || true)
	if [ -z "$got" ] || older "$(go_version "$got")"; then
		say "go on PATH is still ${got:-missing}: put /usr/local/go/bin first in PATH"
		exit 1
	fi
fi
