#!/bin/sh
# child-syscalls.sh: the system calls the sandboxed child makes once its
# seccomp filter is loaded, recorded across tests: each child is traced by
# strace from its start (STACKSHOT_TEST_STRACE_DIR, a test hook), and the
# calls after its seccomp(2) are listed by number, with how many children
# made each. sandbox/filter.go's allow list is this list.
#
#   scripts/child-syscalls.sh [go test arguments...]
#   e.g. scripts/child-syscalls.sh ./sandbox/ ./live/ ./cmd/stackshot/ -run Sandbox
# (needs root and strace; STACKSHOT_SANDBOX=1 sends every target's bytes
# to a child.)
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
GOFLAGS=-tags=stackshot_testhooks STACKSHOT_TEST_STRACE_DIR="$dir" STACKSHOT_SANDBOX=1 \
	go test -count=1 -p 1 "$@" >&2 || echo "child-syscalls: some tests failed (their calls are counted)" >&2
# Each line: "TID [ NR] name(...": the calls after the first seccomp(.
for f in "$dir"/child.*; do
	awk '/ seccomp\(SECCOMP_SET_MODE_FILTER/ { on = 1; next }
	     on && match($0, /\[ *[0-9]+\] [a-z_0-9]+\(/) {
		s = substr($0, RSTART + 1, RLENGTH - 2); sub(/^ +/, "", s); sub(/\] /, " ", s); print s }' "$f" | sort -u
done | sort | uniq -c | sort -k2n
echo "children traced: $(ls "$dir" | wc -l)" >&2
