#!/bin/bash
# The README's first command on a bare machine: build a Debian 12 root
# with debootstrap (minbase, plus git, make and ca-certificates: what the
# README asks for), clone this repository into it, and run 'make demo'
# there in a chroot. The demo's dump must show the demo's own call chains
# (testdata/targets/blocked.c) and a verdict line. Run by .ci/run, as root.
#
#   scripts/bare-root-check.sh [TARGET]   TARGET: demo (default) or test
#
# The packages debootstrap downloads, and the root it installs, are kept
# under STACKSHOT_BARE_CACHE (default /var/cache/stackshot-ci): later runs
# unpack the root instead of installing it. STACKSHOT_BARE_MIRROR overrides the
# Debian mirror (default: this machine's, else deb.debian.org).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
target=${1:-demo}
say() { echo "bare-root: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
	say "needs root (debootstrap, chroot and mounts); run it as root"
	exit 1
fi
command -v debootstrap >/dev/null || PATH=$PATH:/usr/sbin:/sbin
command -v debootstrap >/dev/null || {
	say "debootstrap is not installed (apt-get install debootstrap; scripts/setup.sh test installs it)"
	exit 1
}

# The machine's Debian mirror (not its security archive), from either
# format of apt's sources.
mirror=${STACKSHOT_BARE_MIRROR:-}
if [ -z "$mirror" ] && grep -qs '^ID=debian' /etc/os-release; then
	mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }' || true)
	if [ -z "$mirror" ]; then
		mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
			awk '$1 == "URIs:" && $2 !~ /security/ { print $2; exit }' || true)
	fi
fi
mirror=${mirror:-http://deb.debian.org/debian}

arch=$(dpkg --print-architecture)
cache=${STACKSHOT_BARE_CACHE:-/var/cache/stackshot-ci}
include=git,make,ca-certificates
tarball=$cache/bookworm-minbase-$arch-$(echo "$include" | tr , -).tgz
# The installed root, before anything is added: unpacking it takes
# seconds, installing it minutes. A week old, it is made again.
rootball=${tarball%.tgz}.root.tar
find "$cache" -name '*.root.tar' -mtime +7 -delete 2>/dev/null || true
mkdir -p "$cache"

work=$(mktemp -d /var/tmp/stackshot-bare.XXXXXX)
root=$work/root
mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" 2>/dev/null || true
	done
	# Only once nothing is mounted below it.
	if ! grep -qs " $work/" /proc/self/mounts; then
		rm -rf --one-file-system "$work"
	else
		say "left $work: something is still mounted there"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
if [ ! -s "$rootball" ]; then
	if [ ! -s "$tarball" ]; then
		say "downloading Debian 12's minbase packages from $mirror into $tarball"
		debootstrap --variant=minbase --include="$include" --make-tarball="$tarball.part" \
			bookworm "$work/download" "$mirror" >"$work/debootstrap.log" 2>&1 ||
			{ tail -20 "$work/debootstrap.log" >&2; exit 1; }
		mv "$tarball.part" "$tarball"
		rm -rf "$work/download"
	fi
	say "installing a bare Debian 12 root (kept as $rootball)"
	debootstrap --variant=minbase --include="$include" --unpack-tarball="$tarball" \
		bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log" >&2; exit 1; }
	tar -C "$root" --numeric-owner -cf "$rootball.part" . && mv "$rootball.part" "$rootball"
else
	say "unpacking the bare Debian 12 root $rootball"
	mkdir "$root"
	tar -C "$root" --numeric-owner -xf "$rootball"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The network's own certificate authorities (a proxy's, say), which this
# machine trusts: a bare machine on this network would be given them too.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
	chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
built=$(date +%s)

# The clone, at this working tree's commit.
git clone -q --no-hardlinks "$repo" "$root/src/stackshot"
git -C "$root/src/stackshot" checkout -q --detach "$(git rev-parse HEAD)"

for m in proc sys dev; do
	case $m in
	proc) mount -t proc proc "$root/proc" ;;
	*) mount --bind "/$m" "$root/$m" && mount --make-slave "$root/$m" ;;
	esac
	mounted+=("$root/$m")
done

# Only what a login shell has, and the proxies a network may need.
env=(HOME=/root TERM=dumb LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for v in http_proxy https_proxy no_proxy GOPROXY GOSUMDB GONOSUMDB GOPRIVATE GOFLAGS STACKSHOT_STRICT; do
	[ -n "${!v:-}" ] && env+=("$v=${!v}")
done
say "make $target in the chroot"
status=0
chroot "$root" /usr/bin/env -i "${env[@]}" /bin/bash -c "cd /src/stackshot && make $target" \
	>"$work/out" 2>&1 || status=$?
done_at=$(date +%s)
say "root built in $((built - start))s; make $target took $((done_at - built))s (exit $status)"
if [ $status != 0 ]; then
	tail -40 "$work/out" >&2
	say "make $target failed in the bare root"
	exit 1
fi
if [ "$target" != demo ]; then
	tail -15 "$work/out" >&2 # (make test's summary: passed, failed, skipped and why)
	exit 0
fi

# The demo's dump, checked against the demo's own source: each thread's
# frames, innermost first, must hold these chains, and the dump says its
# verdict.
chains=$(awk '
	/^Thread [0-9]+ "/ { if (name != "") print name ":" fr; name = $3; fr = ""; next }
	/^#[0-9]+ +0x[0-9a-f]+ in / { fr = fr " " $4 }
	END { if (name != "") print name ":" fr }' "$work/out")
fail=0
for want in '"reader":.* reader_c reader_b reader_a start' \
	'"condwait":.* cond_c cond_b cond_a start' \
	'"spinner": spin_c spin_b spin_a start' \
	'"demo":.* main_wait main'; do
	if ! grep -q -- "^$want" <<<"$chains"; then
		say "the dump lacks the chain $want"
		fail=1
	fi
done
if ! grep -q '^Verdict: ' "$work/out"; then
	say "the dump has no verdict line"
	fail=1
fi
if [ $fail != 0 ]; then
	cat "$work/out" >&2
	exit 1
fi
grep '^Verdict: ' "$work/out" >&2
say "ok: make demo on a bare Debian 12 dumps the demo's chains"
