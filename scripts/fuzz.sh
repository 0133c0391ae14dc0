#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the repository for $FUZZTIME each (default 10s),
# one after the other with -parallel $FUZZPARALLEL (default 1), and stops at the first
# failure. `make fuzz` runs it with FUZZTIME=5m (the campaign of issue 7); `make test`
# runs the 10 s version.
#
# $FUZZMINIMIZETIME (default 1000x: at most 1,000 runs) bounds the minimization of each
# new interesting or failing input: with go test's default, 60 s each, a target with
# string arguments spends most of a run shrinking inputs instead of fuzzing
# (FuzzPolicyDecide fuzzed for about 1 s of a 20 s run).
#
#   scripts/fuzz.sh                    # every target
#   scripts/fuzz.sh FuzzLoad FuzzExcerpt  # only these (names as in the list below)
#   FUZZTIME=5m scripts/fuzz.sh
#
# For each target it prints the figures of the last fuzz status line: executions, the
# new interesting inputs of this run, and the corpus size (seeds, testdata/fuzz and
# the cached corpus under $(go env GOCACHE)/fuzz). A failing input is written by go
# test to <package>/testdata/fuzz/<target>/; commit it as a regression test.
#
# The targets are listed by hand (package and name), and the script refuses to run
# when the list and the Fuzz functions of the tree differ, so a new target cannot be
# left out of the campaign unnoticed.
set -euo pipefail

cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-10s}
FUZZPARALLEL=${FUZZPARALLEL:-1}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-1000x}

# package target
TARGETS=(
	"./spec FuzzLoad"
	"./spec FuzzToolCEL"
	"./mcp/upstream FuzzNormalizeName"
	"./mcp/upstream FuzzNormalizeNameGrammar"
	"./runtime FuzzCanonicalJSON"
	"./runtime FuzzIdempotencyKey"
	"./runtime FuzzExcerpt"
	"./runtime FuzzExcerptResult"
	"./runtime FuzzEnvelope"
	"./runtime FuzzPolicyDecide"
	"./runtime/internal/fastschema FuzzValid"
	"./runtime/internal/fastschema FuzzValidSchema"
	"./internal/identity FuzzVerify"
)

# Every func FuzzX in a _test.go file must be listed, so none is silently skipped.
listed=$(printf '%s\n' "${TARGETS[@]}" | sort)
found=$(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . |
	while read -r f; do
		pkg=./$(dirname "${f#./}")
		grep -oE '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |$pkg |"
	done | sort)
if [ "$listed" != "$found" ]; then
	echo "fuzz.sh: the target list differs from the Fuzz functions in the tree:" >&2
	diff <(echo "$listed") <(echo "$found") >&2 || true
	exit 1
fi

want=("$@")
for w in "${want[@]}"; do
	if ! printf '%s\n' "${TARGETS[@]}" | grep -qE " ${w}\$"; then
		echo "fuzz.sh: no target $w; the targets are:" >&2
		printf '  %s\n' "${TARGETS[@]}" >&2
		exit 1
	fi
done
selected() {
	[ ${#want[@]} -eq 0 ] && return 0
	for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}

# run_one PKG NAME fuzzes one target; it prints its status line, and the whole log when
# it fails (exit 1).
run_one() {
	local pkg=$1 name=$2 log start rc secs last execs newi total line
	log=$(mktemp)
	start=$(date +%s)
	set +e
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" -parallel "$FUZZPARALLEL" "$pkg" >"$log" 2>&1
	rc=$?
	set -e
	secs=$(($(date +%s) - start))
	last=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -n 1 || true)
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
	newi=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
	total=$(sed -nE 's/.*\(total: ([0-9]+)\).*/\1/p' <<<"$last")
	line="$pkg $name: execs ${execs:-?}, new interesting ${newi:-?}, corpus ${total:-?}, ${secs}s"
	if [ $rc -ne 0 ]; then
		cat "$log"
		rm -f "$log"
		echo "FAIL $line"
		return 1
	fi
	rm -f "$log"
	echo "ok   $line"
}

# $FUZZJOBS (default 1) targets run at once, each in its own lane of targets run one
# after the other; make fuzz runs two lanes on a 2-CPU machine (13 targets x 5 minutes
# in about 35 minutes instead of 65).
FUZZJOBS=${FUZZJOBS:-1}
picked=()
for t in "${TARGETS[@]}"; do
	read -r pkg name <<<"$t"
	selected "$name" && picked+=("$t")
done
lanes=()
for ((lane = 0; lane < FUZZJOBS; lane++)); do
	(
		status=0
		for ((i = lane; i < ${#picked[@]}; i += FUZZJOBS)); do
			read -r pkg name <<<"${picked[$i]}"
			echo "=== $pkg $name (fuzztime $FUZZTIME, parallel $FUZZPARALLEL, lane $lane)"
			run_one "$pkg" "$name" || { status=1; break; }
		done
		exit $status
	) &
	lanes+=($!)
done
failed=0
for pid in "${lanes[@]}"; do
	wait "$pid" || failed=1
done
if [ $failed -ne 0 ]; then
	echo "=== fuzz: a target failed (see FAIL above)"
	exit 1
fi
echo "=== summary (fuzztime $FUZZTIME each, parallel $FUZZPARALLEL, $FUZZJOBS lane(s)): ${#picked[@]} targets, 0 failures"
