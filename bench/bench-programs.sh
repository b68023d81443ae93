# Sourced by the shell benchmarks (sched-bench.sh, prio-bench.sh): where the
# build's programs are, cusim's libraries on the library path, and a scratch
# directory ROOT removed at exit with the daemon DPID (when set) stopped.
# Needs BENCH (the benchmark's name, for messages); meson sets CS_BUILD, else
# the current directory is taken for the build tree.
B=${CS_BUILD:-$(pwd)}
# The daemon without sanitizers when the build has one (the test build's runs under ASan).
CUSLICED=$B/bench/cusliced-nosan
[ -x "$CUSLICED" ] || CUSLICED=$B/src/daemon/cusliced
SPIN=$B/clients/cs-spin
PRELOAD=$B/src/preload/libcuslice.so
export LD_LIBRARY_PATH=$B/src/sim:$B/src/sim/nvml
export CUSIM_TEST_KERNELS=$B/tests/kernels
for f in "$CUSLICED" "$SPIN" "$PRELOAD"; do
	[ -e "$f" ] || { echo "$BENCH: $f is missing (build first)" >&2; exit 1; }
done
ROOT=$(mktemp -d "/dev/shm/$BENCH-XXXXXX")
DPID=
cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null
	rm -rf "$ROOT"
}
trap cleanup EXIT
