#!/bin/bash
# Priorities' benchmark (issue 14; docs/scheduler.md, "Priorities"): cusliced
# on a cusim H100, cs-spin workers under libcuslice.
#
#   hp   a high-priority group sending one request (a 100 us kernel,
#        synchronized) every 2 ms for 10 s: its completion latency, alone
#        and next to
#   be   a best-effort group saturating the GPU with kernels of BE_US
#        (100 us, then 500 us and 1 ms), 20 in flight between
#        synchronizations.
#
# For each best-effort kernel length: the requests' p50 and p99 alone, next
# to the load with priorities, and next to it without (both groups
# "normal"); and the load's device time while the requests ran as a share
# of what they left (1 - their own device time). The load runs before,
# during and after the requests; its device time during them is its total
# less what it did alone outside their window (at its rate alone, measured
# first in the same run).
#
# Usage: prio-bench.sh (meson sets CS_BUILD; or run from the build tree).
set -u
BENCH=prio-bench
. "$(dirname "$0")/bench-programs.sh"
HP_US=100
PERIOD_US=2000
HP_MS=${HP_MS:-10000}

# start_world TAG HP_PRIORITY BE_PRIORITY
start_world() {
	D=$ROOT/$1
	mkdir -p "$D/state"
	chmod 700 "$D/state"
	export CUSIM_SHM_DIR=$D CUSLICE_SHM_DIR=$D CUSIM_INSTANCE=bench CUSIM_GPUS=H100:8GiB
	export CUSLICE_SOCKET=$D/s
	"$CUSLICED" --socket "$D/s" --admin-socket "$D/admin/s" --state-dir "$D/state" \
		--shm-dir "$D" --metrics-listen none >"$D/cusliced.log" 2>&1 &
	DPID=$!
	for _ in $(seq 100); do [ -S "$D/admin/s" ] && break; sleep 0.05; done
	[ -S "$D/admin/s" ] || { echo "prio-bench: cusliced did not start" >&2; cat "$D/cusliced.log" >&2; exit 1; }
	for g in hp:$2 be:$3; do
		curl -s -X PUT --unix-socket "$D/admin/s" -d "{\"priority\": \"${g#*:}\"}" \
			"http://cusliced/v1/groups/${g%%:*}" >/dev/null
	done
}

stop_world() {
	kill "$DPID" 2>/dev/null
	wait "$DPID" 2>/dev/null
	DPID=
}

# field NAME LINE: the value of NAME=... in a result line.
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

requests() { CUSLICE_GROUP=hp LD_PRELOAD=$PRELOAD "$SPIN" --kernel-us $HP_US --period-us $PERIOD_US --total-ms "$HP_MS"; }
# load BE_US TOTAL_MS
load() { CUSLICE_GROUP=be LD_PRELOAD=$PRELOAD "$SPIN" --kernel-us "$1" --total-ms "$2" --sync-every 20; }

# together BE_US: requests next to the load; sets P50, P99, SHARE.
together() {
	local be_us=$1 lead=1 out hp t_hp rate
	load "$be_us" $((HP_MS + 4000)) >"$D/be.out" 2>&1 &
	local lp=$!
	sleep $lead
	hp=$(requests)
	wait $lp
	out=$(cat "$D/be.out")
	P50=$(field p50_us "$hp")
	P99=$(field p99_us "$hp")
	t_hp=$(field wall_ms "$hp")
	# the load's device time outside the requests' window, at its rate alone
	rate=$BE_RATE
	SHARE=$(echo "($(field device_ms "$out") - $rate * ($(field wall_ms "$out") - $t_hp)) / ($t_hp * (1 - $HP_US / $PERIOD_US))" | bc -l)
}

ROWS=()
row() { ROWS+=("$*"); echo "$*"; }
echo "prio-bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); requests: ${HP_US} us every ${PERIOD_US} us for ${HP_MS} ms"
for be_us in ${BE_LIST:-100 500 1000}; do
	start_world "alone-$be_us" high best-effort
	hp=$(requests)
	A50=$(field p50_us "$hp")
	A99=$(field p99_us "$hp")
	be=$(load "$be_us" 3000)
	BE_RATE=$(echo "$(field device_ms "$be") / $(field wall_ms "$be")" | bc -l)
	together "$be_us"
	W50=$P50 W99=$P99 WSHARE=$SHARE
	stop_world
	start_world "normal-$be_us" normal normal
	together "$be_us"
	N50=$P50 N99=$P99 NSHARE=$SHARE
	stop_world
	row "| $be_us us | $A50 / $A99 | $W50 / $W99 | $(printf %.2f "$(echo "$W99 / $A99" | bc -l)") | $(printf %.2f "$WSHARE") | $N50 / $N99 | $(printf %.2f "$NSHARE") | $(printf %.2f "$BE_RATE") |"
done
echo
echo "| best-effort kernel | requests alone p50 / p99 (us) | with priorities p50 / p99 | p99 / alone | load's share of the rest | without priorities p50 / p99 | load's share | load alone (device/wall) |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
