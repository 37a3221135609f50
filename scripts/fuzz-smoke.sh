#!/bin/sh
# Run every fuzz target of the project for a short time each (default 10s),
# and print each one's rate: executions a second over the whole run (the
# project wants at least 100; a slower one is marked SLOW).
# Seed corpora live in each package's testdata/fuzz/<FuzzName>/.
set -eu
t=${1:-10s}
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "== $pkg $f ($t)"
		if ! go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg" >"$out" 2>&1; then
			cat "$out"
			fail=1
		fi
		# The last progress line: "fuzz: elapsed: 10s, execs: 12345 (...".
		grep 'execs:' "$out" | tail -1 | awk -v name="$f" '{
			e = $3; sub(/s,$/, "", e); n = $5
			if (index(e, "m")) { split(e, m, "m"); e = m[1] * 60 + m[2] }
			rate = (e > 0) ? n / e : 0
			printf "%s: %d execs in %ss: %d/s%s\n", name, n, e, rate, (rate < 100) ? " SLOW" : ""
		}'
	done
done
exit $fail
