#!/bin/sh
# Build the demo target, start it, dump it with stackshot, stop it (by pid).
set -eu
bin=${1:-bin/stackshot}
cc=${CC:-gcc}
mkdir -p testdata/build
demo=testdata/build/demo
fifo=testdata/build/demo.in
out=testdata/build/demo.out
$cc -O2 -g -fomit-frame-pointer -pthread testdata/targets/blocked.c -o "$demo"
rm -f "$fifo" "$out"
mkfifo "$fifo"
"./$demo" spin < "$fifo" > "$out" 2>&1 &
pid=$!
exec 3> "$fifo"          # keep the demo's stdin open while it runs
trap 'kill -KILL $pid 2>/dev/null || true; exec 3>&-; rm -f "$fifo"' EXIT
i=0
until grep -q ready "$out" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 100 ]; then echo "demo target did not start" >&2; exit 1; fi
	sleep 0.05
done
echo "== stackshot $pid  (a demo process: threads blocked in read, futex, nanosleep, epoll_wait, and one spinning)"
echo
"$bin" -s "$pid"
echo
echo "== stackshot -v --mode stop $pid  (per-frame unwind method and pause statistics)"
"$bin" -v --mode stop --no-kernel "$pid" | tail -n 3
