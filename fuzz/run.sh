#!/bin/sh
# Runs libFuzzer targets for a bounded time each: `ninja fuzz` in a build set
# up with -Dfuzz=true (make fuzz), which passes the targets of fuzz/meson.build.
#
#   FUZZ_SECONDS=N fuzz/run.sh BUILD_DIR NAME:MAX_LEN...
#
# BUILD_DIR/fuzz-NAME is run on its working corpus BUILD_DIR/corpus/NAME
# (where it saves new inputs), seeded from fuzz/corpus/NAME (read only, kept
# in git), with the dictionary fuzz/NAME.dict when there is one, for
# $FUZZ_SECONDS (default 60), inputs up to MAX_LEN bytes, 10 s per input at most.
# Each run's output goes to BUILD_DIR/fuzz-NAME.log; a crash, leak, timeout
# or broken invariant leaves BUILD_DIR/crash-NAME-* and prints the log's
# tail. Every target runs even when an earlier one failed; the exit status
# is 1 when any failed. Reproduce with: BUILD_DIR/fuzz-NAME CRASH_FILE
set -u

dir=$1
seconds=${FUZZ_SECONDS:-60}
shift
src=$(dirname "$0")
failed=""

for spec in "$@"; do
	name=${spec%%:*}
	max_len=${spec#*:}
	mkdir -p "$dir/corpus/$name"
	log="$dir/fuzz-$name.log"
	dict=""
	[ -f "$src/$name.dict" ] && dict="-dict=$src/$name.dict"
	printf 'fuzz-%-8s %ss ... ' "$name" "$seconds"
	# stdin is /dev/null: no input (a config naming /dev/stdin) may block on it.
	"$dir/fuzz-$name" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/crash-$name-" $dict \
		"$dir/corpus/$name" "$src/corpus/$name" </dev/null >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	cov=$(sed -n 's/^#[0-9]*[[:space:]]*DONE[[:space:]]*cov: \([0-9]*\).*/\1/p' "$log")
	if [ "$rc" -eq 0 ]; then
		echo "ok: ${runs:-?} inputs, coverage ${cov:-?} edges, corpus $(ls "$dir/corpus/$name" | wc -l) files"
	else
		echo "FAILED (exit $rc): see $log"
		tail -n 40 "$log" | sed 's/^/    /'
		failed="$failed $name"
	fi
done

if [ -n "$failed" ]; then
	echo "fuzz: failed:$failed (inputs: $dir/crash-*)" >&2
	exit 1
fi
