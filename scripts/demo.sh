#!/usr/bin/env bash
# A short guided tour of cuslice on cusim, the simulated GPU machine it is
# tested on: the simulator, libcuslice's quotas, and the product as an
# operator runs it (cusliced, cuslice run/ps/set, three groups with limits).
#
# usage: scripts/demo.sh BUILD_DIR     (make demo)
#
# Everything runs on a private simulator instance (CUSIM_INSTANCE=demo-<pid>)
# that is removed at the end, so it never disturbs another user of cusim.
# Each step checks what it shows; the script exits non-zero at the first
# step that misbehaves, naming it.
set -euo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
build=$(cd "$1" && pwd)
ctl=$build/src/sim/cusim-ctl
alloc=$build/clients/cs-alloc
nvml=$build/clients/cs-nvml-query
loader=$build/clients/cs-runtime-loader
direct=$build/clients/cs-dlsym-direct
spin=$build/clients/cs-spin
daemon=$build/src/daemon/cusliced
cli=$build/src/cli/cuslice
export CUSIM_TEST_KERNELS=$build/tests/kernels
for f in "$ctl" "$alloc" "$nvml" "$loader" "$direct" "$daemon" "$cli"; do
	if [ ! -x "$f" ]; then
		echo "demo: $f is missing; build first (make)" >&2
		exit 1
	fi
done

export CUSIM_INSTANCE=demo-$$
export CUSIM_GPUS="H100:80GiB:132,A100:40GiB:108"
export CUSIM_CTX_MEM=256MiB
unset CUSIM_FAULTS CUDA_VISIBLE_DEVICES
# The dlopen()-based programs find cusim's libcuda.so.1 / libnvidia-ml.so.1
# here, as applications find the real driver's on a GPU host.
export LD_LIBRARY_PATH=$build/src/sim:$build/src/sim/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

GiB=$((1 << 30))
CTX=$((256 << 20))
tmp=$(mktemp -d)
holders=()

cleanup() {
	[ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null
	for pid in "${holders[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	"$ctl" reset >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

if [ -t 1 ]; then
	bold=$'\e[1m' dim=$'\e[2m' green=$'\e[32m' red=$'\e[31m' off=$'\e[0m'
else
	bold='' dim='' green='' red='' off=''
fi
step=0

section() {
	step=$((step + 1))
	printf '\n%s== %d. %s ==%s\n' "$bold" "$step" "$1" "$off"
}

# What the reader should look at in the output just shown.
notice() {
	printf '%s   -> %s%s\n' "$dim" "$*" "$off"
}

ok() {
	printf '%s   ok: %s%s\n' "$green" "$*" "$off"
}

die() {
	printf '%sdemo: step %d failed: %s%s\n' "$red" "$step" "$*" "$off" >&2
	exit 1
}

# Shows a command line, runs it, keeps its output in $tmp/out; fails on non-zero.
run() {
	local rc
	printf '%s$ %s%s\n' "$bold" "${*##*/}" "$off"
	set +e
	"$@" >"$tmp/out" 2>&1
	rc=$?
	set -e
	sed 's/^/    /' "$tmp/out"
	[ "$rc" -eq 0 ] || die "'${1##*/}' exited with $rc"
}

# Like run, but shows only the unindented summary lines of the output.
run_summary() {
	local rc
	printf '%s$ %s%s\n' "$bold" "${*##*/}" "$off"
	set +e
	"$@" >"$tmp/out" 2>&1
	rc=$?
	set -e
	grep -v '^ ' "$tmp/out" | sed 's/^/    /'
	[ "$rc" -eq 0 ] || die "'${1##*/}' exited with $rc"
}

# Same, for a command that must fail with exit status 1.
run_fails() {
	local rc
	printf '%s$ %s%s\n' "$bold" "${*##*/}" "$off"
	set +e
	"$@" >"$tmp/out" 2>&1
	rc=$?
	set -e
	sed 's/^/    /' "$tmp/out"
	[ "$rc" -eq 1 ] || die "'${1##*/}' exited with $rc, expected the failure status 1"
}

# Starts a cs-alloc that holds its memory until SIGTERM; waits for "ready".
start_holder() {
	local name=$1
	shift
	printf '%s$ cs-alloc %s --hold-until-signal &%s\n' "$bold" "$*" "$off"
	"$alloc" "$@" --hold-until-signal >"$tmp/$name" 2>&1 &
	holders+=($!)
	eval "${name}_pid=$!"
	for _ in $(seq 1 300); do
		grep -qx ready "$tmp/$name" && break
		kill -0 "$!" 2>/dev/null || break
		sleep 0.1
	done
	sed 's/^/    /' "$tmp/$name"
	grep -qx ready "$tmp/$name" || die "the holder ($name) never became ready"
}

# The number after KEY= on the first line of file that starts with PREFIX.
field() {
	sed -n "s/^$2.*$3=\([0-9]*\).*/\1/p" "$1" | head -n 1
}

printf '%scusim demo%s: a simulated machine with two GPUs, shared by real processes.\n' \
	"$bold" "$off"
printf 'instance %s, CUSIM_GPUS="%s", CUSIM_CTX_MEM=%s\n' "$CUSIM_INSTANCE" "$CUSIM_GPUS" \
	"$CUSIM_CTX_MEM"

section "Create the machine"
run "$ctl" create
run "$ctl" status
notice "two devices with their own UUIDs and PCI addresses; no process uses them yet."
grep -q "H100" "$tmp/out" && grep -q "A100" "$tmp/out" || die "status does not list both GPUs"
ok "instance created"

section "The monitoring view (NVML, as nvidia-smi sees it)"
run "$nvml"
notice "cs-nvml-query dlopen()s libnvidia-ml.so.1 like nvidia-smi; cusim's answers it."
run "$nvml" --json --device 0
grep -q '"total":[[:space:]]*85899345920' "$tmp/out" || die "NVML does not report 80 GiB on GPU 0"
ok "NVML reports device 0 with exactly 80 GiB"

section "The driver view (how CUDA programs load libcuda.so.1)"
run_summary "$loader"
notice "the runtime's path: dlopen + cuGetProcAddress_v2 only; every call via returned pointers."
run_summary "$loader" --check-variants --ptds
notice "each (name, version, flags) answer is the ABI variant that version compiled against."
run "$direct"
notice "cuBLASLt's path: dlsym of versioned names such as cuMemAlloc_v2."
ok "three loading paths reach the same simulated GPU"

section "Two processes compete for one GPU's memory"
start_holder first --bytes 60GiB --verify sample
free_after=$(field "$tmp/first" "meminfo after:" free)
notice "the first process holds 60 GiB plus its 256 MiB context; free is now $free_after bytes."
run "$nvml" --device 0
grep -q "cs-alloc" "$tmp/out" || die "NVML does not list the holding process"
notice "NVML lists the holder and its memory, as nvidia-smi would."
# A second process needs its own context: it can have what is left after that, exactly.
fits=$((free_after - CTX))
run "$alloc" --bytes "$fits" --verify sample
notice "the second process got exactly the free memory ($fits bytes) ..."
run_fails "$alloc" --bytes $((fits + 1)) --verify sample
grep -q "CUDA_ERROR_OUT_OF_MEMORY" "$tmp/out" || die "one byte more did not fail with out of memory"
notice "... and one byte more (a 512-byte allocation unit) fails with CUDA_ERROR_OUT_OF_MEMORY."
ok "capacity is shared and exact across processes"

section "Memory comes back when a process ends"
printf '%s$ kill -TERM %s%s\n' "$bold" "$first_pid" "$off"
kill -TERM "$first_pid"
wait "$first_pid" || die "the holder did not exit cleanly on SIGTERM"
sed 's/^/    /' "$tmp/first" | tail -n 3
notice "on SIGTERM the holder freed its memory and exited."
start_holder second --bytes 70GiB --verify sample
notice "a new process can have 70 GiB now."
printf '%s$ kill -KILL %s%s\n' "$bold" "$second_pid" "$off"
kill -KILL "$second_pid"
wait "$second_pid" 2>/dev/null || true
run "$alloc" --bytes 79GiB --verify sample
notice "even after kill -9 (no exit handlers) the memory is free again at once, as on a GPU."
ok "memory of exited and killed processes is returned"

section "Injected faults"
run_fails env CUSIM_FAULTS="cuMemAlloc_v2@2=OUT_OF_MEMORY" \
	"$alloc" --count 3 --bytes 1GiB --verify sample
grep -q "allocation 2 of 3" "$tmp/out" || die "the fault did not hit the 2nd cuMemAlloc_v2"
notice "CUSIM_FAULTS made this process's 2nd cuMemAlloc_v2 fail although 79 GiB are free."
run "$ctl" fault add "cuMemAlloc_v2x*=OUT_OF_MEMORY"
run "$ctl" fault list
run_fails "$alloc" --bytes 1MiB
notice "a fault armed with cusim-ctl hits every process of the instance ..."
run "$ctl" fault clear
run "$alloc" --bytes 1MiB
notice "... until it is cleared."
ok "faults are injected per process and per instance"

section "A GPU falls off the bus"
run "$ctl" device lost 1
run_fails "$alloc" --device 1 --bytes 1MiB
notice "device 1 is lost: its calls fail; device 0 is unaffected:"
run "$alloc" --device 0 --bytes 1MiB
run "$ctl" device healthy 1
run "$alloc" --device 1 --bytes 1MiB
ok "device loss is simulated per device"

section "Two processes share the GPU's time"
notice "each submits 300 ms of kernels (cusim_spin from an nvcc-built fatbin); alone it takes 300 ms"
run "$spin" --kernel-us 5000 --total-ms 300 --sync-every 4
"$spin" --kernel-us 5000 --total-ms 300 --sync-every 4 >"$tmp/spin-a" 2>&1 &
spin_a=$!
run "$spin" --kernel-us 5000 --total-ms 300 --sync-every 4
wait "$spin_a" || die "the first cs-spin failed"
sed 's/^/    (other process) /' "$tmp/spin-a"
wall_b=$(sed -n 's/^wall_ms=\([0-9]*\).*/\1/p' "$tmp/out")
wall_a=$(sed -n 's/^wall_ms=\([0-9]*\).*/\1/p' "$tmp/spin-a")
last=$(( wall_a > wall_b ? wall_a : wall_b ))
[ "$last" -ge 500 ] || die "two processes finished in ${last} ms: the device was not shared"
ok "together they take about 600 ms: one device, time-sliced between processes"

section "A group quota with libcuslice"
notice "job-a's processes share 4 GiB on GPU 0, whatever each of them asks for"
export LD_PRELOAD=$build/src/preload/libcuslice.so CUSLICE_GROUP=job-a-$$ CUSLICE_MEM_LIMIT=0=4GiB
export CUSLICE_SHM_DIR=$tmp CUSLICE_CTX_MEM=$CUSIM_CTX_MEM
start_holder quota_a --bytes 2GiB --verify sample
run "$alloc" --bytes 1536MiB --verify sample
total=$(field "$tmp/out" "meminfo before" total)
[ "$total" -eq $((4 * GiB)) ] || die "cuMemGetInfo inside the group shows total $total, expected 4 GiB"
notice "the second process sees a 4 GiB GPU with 1.5 GiB free (two contexts + 2 GiB are taken) and fits exactly"
run_fails "$alloc" --bytes 1537MiB --verify none
notice "one MiB more does not fit: CUDA_ERROR_OUT_OF_MEMORY, and libcuslice says why"
run "$nvml"
notice "NVML inside the group: a 4096 MiB GPU 0 and only the group's processes"
kill -9 "$quota_a_pid"
wait "$quota_a_pid" 2>/dev/null || true
run "$alloc" --bytes 3840MiB --verify none
notice "after kill -9 of the holder its 2 GiB and context come back to the group at once"
unset LD_PRELOAD CUSLICE_GROUP CUSLICE_MEM_LIMIT CUSLICE_SHM_DIR CUSLICE_CTX_MEM
ok "one quota per group, exact at the byte, shared by its processes, reclaimed from the dead"

section "The product: cusliced, and three groups run with cuslice"
sock=$tmp/cusliced.sock
admin=$tmp/admin/cusliced.sock
mkdir -p "$tmp/state" "$tmp/shm"
printf '%s$ cusliced --socket %s --admin-socket %s --state-dir %s --metrics-listen none &%s\n' \
	"$bold" "${sock##*/}" admin/"${admin##*/}" state "$off"
"$daemon" --socket "$sock" --admin-socket "$admin" --state-dir "$tmp/state" --shm-dir "$tmp/shm" \
	--metrics-listen none --log-level warn >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
# Processes register on the registration socket; the CLI administers on the admin socket.
export CUSLICE_SOCKET=$sock CUSLICE_ADMIN_SOCKET=$admin
for _ in $(seq 1 100); do
	"$cli" status >/dev/null 2>&1 && break
	sleep 0.1
done
run "$cli" status
export CUSLICE_CTX_MEM=$CUSIM_CTX_MEM
notice "three jobs: train (8 GiB, 50 % of the GPU), infer (4 GiB, 30 %), notebook (2 GiB)"
printf '%s$ cuslice run --group train --mem 8GiB --cores 50 -- cs-spin ... &%s\n' "$bold" "$off"
"$cli" run --group train --mem 8GiB --cores 50 -- \
	"$spin" --kernel-us 2000 --total-ms 1200 --sync-every 4 >"$tmp/train" 2>&1 &
train_pid=$!
printf '%s$ cuslice run --group infer --mem 4GiB --cores 30 -- cs-spin ... &%s\n' "$bold" "$off"
"$cli" run --group infer --mem 4GiB --cores 30 -- \
	"$spin" --kernel-us 500 --total-ms 600 --sync-every 8 >"$tmp/infer" 2>&1 &
infer_pid=$!
printf '%s$ cuslice run --group notebook --mem 2GiB -- cs-alloc --bytes 1GiB --hold-until-signal &%s\n' \
	"$bold" "$off"
"$cli" run --group notebook --mem 2GiB -- \
	"$alloc" --bytes 1GiB --verify none --hold-until-signal >"$tmp/notebook" 2>&1 &
notebook_pid=$!
holders+=("$notebook_pid")
for _ in $(seq 1 100); do
	grep -qx ready "$tmp/notebook" && break
	sleep 0.1
done
sleep 1.2	# the daemon measures shares over its last second
run "$cli" ps
notice "every process with its group, memory and limit, and its share of the GPU against the cap"
run_fails "$cli" run --group notebook -- "$alloc" --bytes 1GiB --verify none
notice "a second notebook process: the group holds 1 GiB + two contexts of its 2 GiB, 1 GiB more does not fit"
run "$cli" set notebook --mem 4GiB
run "$cli" run --group notebook -- "$alloc" --bytes 1GiB --verify none
notice "the new limit reached the group at once: the same request fits now"
wait "$train_pid" || die "the train job failed"
wait "$infer_pid" || die "the infer job failed"
sed 's/^/    (train, 50 %) /' "$tmp/train"
sed 's/^/    (infer, 30 %) /' "$tmp/infer"
wall_train=$(sed -n 's/^wall_ms=\([0-9]*\).*/\1/p' "$tmp/train")
[ "$wall_train" -ge 1800 ] || die "1.2 s of kernels at 50 % took ${wall_train} ms: not limited"
notice "1.2 s of kernels at 50 % take about 2.4 s; 0.6 s at 30 % about 2 s: each group held to its share"
kill "$notebook_pid" 2>/dev/null || true
wait "$notebook_pid" 2>/dev/null || true
kill "$daemon_pid"
wait "$daemon_pid" || die "cusliced did not stop cleanly"
daemon_pid=
[ -S "$sock" ] || die "cusliced took its socket away: the node would look unmanaged"
unset CUSLICE_CTX_MEM CUSLICE_SOCKET CUSLICE_ADMIN_SOCKET
ok "cusliced stopped cleanly (SIGTERM); its socket stays (the node stays managed), policies in the state directory"

section "Reset"
run "$ctl" reset
notice "the instance file is gone; the next program would create a fresh machine."
printf '\n%sdemo finished: every step behaved as described.%s\n' "$green" "$off"
