#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the repository for $FUZZTIME each (default 10s),
# one after the other with -parallel $FUZZPARALLEL (default 1), and stops at the first
# failure. `make fuzz` runs it with FUZZTIME=5m (the campaign of issue 7). A count,
# FUZZTIME=100000x, runs that many inputs instead, with no wall-clock deadline.
#
# `scripts/fuzz.sh -replay` fuzzes nothing: it runs every target as a plain test (what
# `go test` does without -fuzz, and what make test's unit run does) and fails unless
# every file of every <package>/testdata/fuzz/<Target>/ was replayed, and every such
# directory is named after a target of its package (a renamed target would leave its
# corpus unread). `make test` runs this, and no campaign: a campaign's result depends on
# the wall clock and the machine's load.
#
# $FUZZMINIMIZETIME (default 1000x: at most 1,000 runs) bounds the minimization of each
# new interesting or failing input: with go test's default, 60 s each, a target with
# string arguments spends most of a run shrinking inputs instead of fuzzing
# (FuzzPolicyDecide fuzzed for about 1 s of a 20 s run).
#
#   scripts/fuzz.sh                    # every target
#   scripts/fuzz.sh FuzzLoad FuzzExcerpt  # only these (names as in the list below)
#   FUZZTIME=5m scripts/fuzz.sh
#   scripts/fuzz.sh -replay            # every committed corpus, replayed as tests
#
# For each target it prints the figures of the last fuzz status line: executions, the
# new interesting inputs of this run, and the corpus size (seeds, testdata/fuzz and
# the cached corpus under $(go env GOCACHE)/fuzz). A failing input is written by go
# test to <package>/testdata/fuzz/<target>/; commit it as a regression test.
#
# A target fails the campaign when go test writes a failing input, or fails in any way
# but one: with a duration FUZZTIME, Go's fuzzing coordinator can fail a target that
# found nothing, at the -fuzztime boundary, with a bare "context deadline exceeded"
# (a race between the deadline and its cancellation of the workers, golang/go#75804;
# more likely on a loaded machine). A run that ends that way, wrote no input and whose
# corpus then replays clean as a test is reported as that race, not as a failure.
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
	"./internal/canonjson FuzzCanonicalJSON"
	"./runtime FuzzIdempotencyKey"
	"./runtime FuzzDecodeArgs"
	"./runtime FuzzExcerpt"
	"./runtime FuzzExcerptResult"
	"./runtime FuzzEnvelope"
	"./runtime FuzzPolicyDecide"
	"./runtime/internal/fastschema FuzzValid"
	"./runtime/internal/fastschema FuzzValidSchema"
	"./internal/identity FuzzVerify"
	"./runtime/internal/sqlfile FuzzNewPositional"
	"./internal/textsafe FuzzField"
	"./sandbox FuzzScript"
	"./sandbox FuzzProvenance"
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

replay=0
if [ "${1:-}" = "-replay" ]; then
	replay=1
	shift
	if [ $# -gt 0 ]; then
		echo "fuzz.sh: -replay takes no target names" >&2
		exit 1
	fi
fi

# replay_all runs each package's targets as plain tests and checks that every corpus
# file was replayed: go test -v prints "--- PASS: Target/<file>" (or SKIP) for each.
replay_all() {
	local status=0 pkg dir names t f b log
	local -A bypkg=()
	for t in "${TARGETS[@]}"; do
		read -r pkg name <<<"$t"
		bypkg[$pkg]="${bypkg[$pkg]:-}${bypkg[$pkg]:+|}$name"
	done
	for pkg in $(printf '%s\n' "${!bypkg[@]}" | sort); do
		dir=${pkg#./}
		names=${bypkg[$pkg]}
		local orphans=0
		# A corpus directory named after no target of its package is never replayed.
		if [ -d "$dir/testdata/fuzz" ]; then
			for f in "$dir"/testdata/fuzz/*/; do
				[ -d "$f" ] || continue
				t=$(basename "$f")
				if ! grep -qxE "$names" <<<"$t"; then
					echo "FAIL $pkg: $dir/testdata/fuzz/$t is the corpus of no target of the package; rename or remove it" >&2
					orphans=$((orphans + 1))
					status=1
				fi
			done
		fi
		log=$(mktemp)
		if ! go test -run "^($names)\$" -v "$pkg" >"$log" 2>&1; then
			cat "$log"
			echo "FAIL $pkg: the fuzz targets fail as tests" >&2
			rm -f "$log"
			status=1
			continue
		fi
		local files=0 missing=0
		for t in ${names//|/ }; do
			[ -d "$dir/testdata/fuzz/$t" ] || continue
			for f in "$dir/testdata/fuzz/$t"/*; do
				[ -f "$f" ] || continue
				files=$((files + 1))
				b=$(basename "$f")
				if ! grep -qF -e "--- PASS: $t/$b " -e "--- SKIP: $t/$b " "$log"; then
					echo "FAIL $pkg $t: $f was not replayed" >&2
					missing=$((missing + 1))
				fi
			done
		done
		rm -f "$log"
		if [ $missing -gt 0 ]; then
			status=1
		elif [ $orphans -eq 0 ]; then
			echo "ok   $pkg: ${names//|/, }: $files corpus files replayed"
		fi
	done
	return $status
}
if [ $replay -eq 1 ]; then
	replay_all
	exit $?
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

# corpus_files PKG NAME lists the committed (and newly written) inputs of a target.
corpus_files() {
	ls "${1#./}/testdata/fuzz/$2" 2>/dev/null | sort || true
}

# boundary_race LOG says whether a failed run is the coordinator's -fuzztime race: the
# target's only failure is a bare "context deadline exceeded" and no input was written.
boundary_race() {
	local log=$1 name=$2
	grep -q 'Failing input written to' "$log" && return 1
	[ "$(grep -c -- '--- FAIL: ' "$log")" -eq 1 ] || return 1
	grep -qE -- "^--- FAIL: ${name} \(" "$log" || return 1
	grep -qxE '[[:space:]]+context deadline exceeded' "$log" || return 1
	# Nothing else the target reported: only the status lines, the FAIL lines and the error.
	! grep -vE '^(fuzz: |--- FAIL: |FAIL|exit status |ok |warning: )|^[[:space:]]+context deadline exceeded$|^$' "$log" | grep -q .
}

# run_one PKG NAME fuzzes one target; it prints its status line, and the whole log when
# it fails (exit 1).
run_one() {
	local pkg=$1 name=$2 log start rc secs last execs newi total line before after written
	log=$(mktemp)
	start=$(date +%s)
	before=$(corpus_files "$pkg" "$name")
	set +e
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" -parallel "$FUZZPARALLEL" "$pkg" >"$log" 2>&1
	rc=$?
	set -e
	if [ $rc -ne 0 ]; then
		after=$(corpus_files "$pkg" "$name")
		written=$(comm -13 <(echo "$before") <(echo "$after"))
		if [ -z "$written" ] && boundary_race "$log" "$name"; then
			# Confirm that there is nothing to find: the corpus, as a plain test.
			if go test -count=1 -run "^${name}\$" "$pkg" >>"$log" 2>&1; then
				echo "note $pkg $name: failed at the -fuzztime boundary with a bare \"context deadline exceeded\" and wrote no input (golang/go#75804); the corpus replays clean, so this is not a finding"
				rc=0
			fi
		elif [ -n "$written" ]; then
			echo "$pkg $name wrote a failing input: $(tr '\n' ' ' <<<"$written")"
		fi
	fi
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
