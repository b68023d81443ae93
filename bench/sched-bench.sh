#!/bin/bash
# The GPU scheduler's benchmark (issue 14; docs/scheduler.md): cusliced on a
# cusim H100 of 8 GiB whose unified memory is paged at 40 GB/s, cs-spin
# workers under libcuslice in oversubscribe mode, one group each, each with
# a managed working set that its 10 ms kernels touch whole (synchronizing
# after every kernel).
#
#   A  two 5 GiB sets (each fits, together they do not): each alone, the
#      pair scheduled, the pair unscheduled (sched = off);
#   B  three 3.5 GiB sets: the same;
#   C  two 3 GiB sets (they fit): alone and together, scheduled;
#   D  fairness: two 5 GiB sets running 80 s each, the time each held the
#      GPU after 60 s, with equal weights and with weights 1:3;
#   E  switches: the time from a holder's drop to the next holder's first
#      kernel, from the daemon's API (all of A, B and D).
#
# Usage: sched-bench.sh (meson sets CS_BUILD; or run from the build tree).
# Prints one line per measure and a Markdown table at the end.
set -u
BENCH=sched-bench
. "$(dirname "$0")/bench-programs.sh"
KERNEL_US=10000
BW=40GB

# A fresh instance and daemon in $D: start_world TAG [cusliced options...]
start_world() {
	D=$ROOT/$1
	shift
	mkdir -p "$D/state"
	chmod 700 "$D/state"
	export CUSIM_SHM_DIR=$D CUSLICE_SHM_DIR=$D CUSIM_INSTANCE=bench CUSIM_GPUS=H100:8GiB
	export CUSIM_CTX_MEM=64MiB CUSLICE_CTX_MEM=64MiB CUSIM_UM_BANDWIDTH=$BW
	export CUSLICE_SOCKET=$D/s
	"$CUSLICED" --socket "$D/s" --admin-socket "$D/admin/s" --state-dir "$D/state" \
		--shm-dir "$D" --metrics-listen none --sched-bandwidth $BW ${SCHED_OPTS:-} "$@" >"$D/cusliced.log" 2>&1 &
	DPID=$!
	for _ in $(seq 100); do [ -S "$D/admin/s" ] && return; sleep 0.05; done
	echo "sched-bench: cusliced did not start" >&2
	cat "$D/cusliced.log" >&2
	exit 1
}

stop_world() {
	kill "$DPID" 2>/dev/null
	wait "$DPID" 2>/dev/null
	DPID=
}

api() { curl -s --unix-socket "$D/admin/s" "http://cusliced$1"; }

# run_groups SET TOTAL_MS GROUP... : starts one cs-spin per group at once,
# waits for all; sets MAKESPAN (s) and WALLS (ms, per group).
run_groups() {
	local set=$1 total=$2
	shift 2
	local pids=() t0 t1
	t0=$(date +%s.%N)
	for g in "$@"; do
		CUSLICE_MEM_MODE=oversubscribe CUSLICE_GROUP=$g LD_PRELOAD=$PRELOAD \
			"$SPIN" --kernel-us $KERNEL_US --total-ms "$total" --sync-every 1 \
			--managed "$set" >"$D/$g.out" 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
	t1=$(date +%s.%N)
	MAKESPAN=$(echo "$t1 - $t0" | bc -l)
	WALLS=""
	for g in "$@"; do
		WALLS="$WALLS $(sed -n 's/.*wall_ms=\([0-9.]*\).*/\1/p' "$D/$g.out")"
	done
}

# The switch times (ms) the daemon kept, space-separated.
switches() {
	api /v1/gpus | python3 -c '
import json, sys
s = json.load(sys.stdin)["gpus"][0].get("scheduler", {})
print(" ".join("%.0f" % (x * 1000) for x in s.get("switch_seconds", [])))'
}

SWITCHES=""
ROWS=()
# ONLY="A D" runs those scenarios alone; SKIP_UNSCHED=1 leaves out the unscheduled runs;
# SCHED_OPTS="--sched-prefetch off" adds cusliced options (an A/B of a parameter).
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
row() { ROWS+=("$*"); echo "$*"; }

# scenario NAME SET TOTAL_MS N
scenario() {
	local name=$1 set=$2 total=$3 n=$4 alone=0 groups=()
	for i in $(seq "$n"); do groups+=("g$i"); done
	start_world "$name-alone"
	for g in "${groups[@]}"; do
		run_groups "$set" "$total" "$g"
		alone=$(echo "$alone + $MAKESPAN" | bc -l)
	done
	stop_world
	start_world "$name-sched"
	run_groups "$set" "$total" "${groups[@]}"
	local sched=$MAKESPAN
	SWITCHES="$SWITCHES $(switches)"
	local grants
	grants=$(grep -c "granted:" "$D/cusliced.log")
	stop_world
	local unsched=-1
	if [ "${SKIP_UNSCHED:-0}" = 0 ]; then
		start_world "$name-unsched" --sched off
		run_groups "$set" "$total" "${groups[@]}"
		unsched=$MAKESPAN
		stop_world
	fi
	row "| $name | $n x $set, $total ms each | $(printf %.2f "$alone") | $(printf %.2f "$sched") | $(printf %.3f "$(echo "$sched / $alone" | bc -l)") | $(printf %.2f "$unsched") | $(printf %.1f "$(echo "$unsched / $sched" | bc -l)") | $grants |"
}

echo "sched-bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), cusim UM bandwidth $BW"
want A && scenario A 5GiB 3000 2
want B && scenario B 3584MiB 2000 3

# C: sets that fit: no serialization, each group's throughput as alone.
if want C; then
start_world C-alone
run_groups 3GiB 3000 g1
ALONE_C=$MAKESPAN
stop_world
start_world C-pair
run_groups 3GiB 3000 g1 g2
PAIR_C=$MAKESPAN
MODE_C=$(api /v1/gpus | python3 -c 'import json,sys; s=json.load(sys.stdin)["gpus"][0].get("scheduler",{}); print(s.get("serializations",0))')
stop_world
row "| C | 2 x 3GiB, 3000 ms each (fit) | alone $(printf %.2f "$ALONE_C") s for 3 s of kernels | together $(printf %.2f "$PAIR_C") s for 6 s | throughput together / alone $(printf %.3f "$(echo "(6 / $PAIR_C) / (3 / $ALONE_C)" | bc -l)") | serializations $MODE_C | | |"
fi

# fairness W1 W2 TAG: two 5 GiB sets with sched_weight W1 and W2 (managed
# groups, oversubscribe mode) running 80 s each; the time each held the GPU
# after 60 s, and its ratio against W2/W1.
fairness() {
	local pids=()
	start_world "D-fair-$3"
	for g in g1 g2; do
		local w=$1
		[ $g = g2 ] && w=$2
		curl -s -X PUT --unix-socket "$D/admin/s" -d "{\"memory_mode\": \"oversubscribe\", \"sched_weight\": $w}" \
			"http://cusliced/v1/groups/$g" >/dev/null
		CUSLICE_MEM_MODE=oversubscribe CUSLICE_GROUP=$g LD_PRELOAD=$PRELOAD \
			"$SPIN" --kernel-us $KERNEL_US --total-ms 80000 --sync-every 1 --managed 5GiB \
			>"$D/$g.out" 2>&1 &
		pids+=($!)
	done
	sleep 60
	FAIR=$(api /v1/gpus | W1=$1 W2=$2 python3 -c '
import json, sys
s = json.load(sys.stdin)["gpus"][0]["scheduler"]
import os
h = {m["group"]: m["held_seconds"] for m in s["queue"]}
a, b = h.get("g1", 0), h.get("g2", 0)
want = float(os.environ["W2"]) / float(os.environ["W1"])
print("held g1 %.2f s, g2 %.2f s, g2/g1 %.3f (weights %s:%s, %.3f of it), %d switches" %
      (a, b, b / a if a else 0, os.environ["W1"], os.environ["W2"], (b / a) / want if a else 0,
       s["switches"]))')
	SWITCHES="$SWITCHES $(switches)"
	kill "${pids[@]}" 2>/dev/null
	wait "${pids[@]}" 2>/dev/null
	stop_world
	row "| D | 2 x 5GiB, 60 s, weights $1:$2 | $FAIR | | | | | |"
}
want D && fairness 1 1 equal
want D && fairness 1 3 weighted

python3 - "$SWITCHES" <<'EOF'
import sys
v = sorted(int(x) for x in sys.argv[1].split())
if v:
    q = lambda p: v[min(len(v) - 1, int(p * len(v)))]
    print("| E | switch (drop to next holder's first kernel), %d switches | p50 %d ms | p90 %d ms | p99 %d ms | max %d ms | | | |" % (len(v), q(.5), q(.9), q(.99), v[-1]))
EOF
