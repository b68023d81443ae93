#!/bin/sh
# The driver directory (docs/injection.md), with cusim as the node's "real"
# driver and no LD_PRELOAD anywhere:
#
#   test-driver-dir.sh TOOL SHIMS LIBCUSLICE CUSIM_LIBCUDA CUSIM_LIBNVML
#   (environment: CS_CLIENTS_DIR)
#
# - the shims define nothing of the driver's (one marker symbol) and load
#   libcuslice before the real library;
# - cuslice-driver-dir refuses a shim as the real driver, and makes DIR;
# - a program linked with -lcuda (cs-alloc) gets the group's limit: the
#   view says 300 MiB, the second 200 MiB allocation fails with
#   CUDA_ERROR_OUT_OF_MEMORY; without configuration it passes through;
# - a program that dlopens libcuda.so.1 and resolves through
#   cuGetProcAddress (cs-runtime-loader, NVIDIA's runtime's path) sees the
#   same limit; NVML (cs-nvml-query) too;
# - as root, the node-wide mode: DIR in an ld.so.conf, the cache made by
#   ldconfig -X -C into a private /etc (mount namespace; the node's own
#   cache and links untouched): the program finds the shim with no
#   LD_LIBRARY_PATH at all.
set -eu
abs() {
	case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
}
tool=$(abs "$1") shims=$(abs "$2") lib=$(abs "$3") sim_cuda=$(abs "$4") sim_nvml=$(abs "$5")
clients=$CS_CLIENTS_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
dir=$tmp/driver
n=0

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

ok() {
	n=$((n + 1))
	echo "ok $n: $*"
}

for s in libcuda.so.1 libnvidia-ml.so.1; do
	defined=$(nm -D --defined-only "$shims/$s" | awk '{ print $3 }' | tr '\n' ' ')
	[ "$defined" = "cuslice_driver_shim " ] || fail "$s defines: $defined"
	needed=$(readelf -d "$shims/$s" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
	case $needed in
	"libcuslice.so libcuslice-real-"*) ;;
	*) fail "$s needs, in order: $needed" ;;
	esac
done
ok "the shims define one marker and need libcuslice before the real library"

if "$tool" --cuda "$shims/libcuda.so.1" --nvml "$sim_nvml" --libcuslice "$lib" --shims "$shims" \
	"$dir" 2>"$tmp/err"; then
	fail "cuslice-driver-dir took a shim for the real driver"
fi
grep -q "is a cuslice shim itself" "$tmp/err" || { cat "$tmp/err" >&2; fail "no reason given"; }
"$tool" --cuda "$sim_cuda" --nvml "$sim_nvml" --libcuslice "$lib" --shims "$shims" "$dir" >/dev/null
[ "$(readlink "$dir/real/libcuslice-real-cuda.so.1")" = "$sim_cuda" ] || fail "real/ link"
ok "cuslice-driver-dir: refuses a shim as the driver; makes $dir"

mkdir "$tmp/shm"
# run PROGRAM ARGS...: on cusim through the driver directory, no LD_PRELOAD.
run() {
	env -u LD_PRELOAD CUSIM_SHM_DIR="$tmp/shm" CUSLICE_SHM_DIR="$tmp/shm" \
		CUSLICE_SOCKET="$tmp/none" LD_LIBRARY_PATH="$dir" "$@" >"$tmp/out" 2>&1
}
limit=314572800
run env CUSLICE_MEM_LIMIT=300MiB "$clients/cs-alloc" --bytes 200MiB --count 2 --expect-oom ||
	{ cat "$tmp/out" >&2; fail "cs-alloc: the second 200 MiB allocation was not refused"; }
grep -q "total=$limit " "$tmp/out" || { cat "$tmp/out" >&2; fail "cs-alloc's view is not 300 MiB"; }
ok "-lcuda program: the group's 300 MiB in its view, the allocation past it refused"
run "$clients/cs-alloc" --bytes 200MiB --count 2 ||
	{ cat "$tmp/out" >&2; fail "without configuration cs-alloc failed"; }
grep -q "total=$limit " "$tmp/out" && fail "unconfigured, the view is still limited"
ok "-lcuda program without configuration: passed through"
run env CUSLICE_MEM_LIMIT=300MiB "$clients/cs-runtime-loader" ||
	{ cat "$tmp/out" >&2; fail "cs-runtime-loader"; }
grep -q "device 0: .*, $limit bytes" "$tmp/out" ||
	{ cat "$tmp/out" >&2; fail "cs-runtime-loader (dlopen, cuGetProcAddress) is not governed"; }
ok "dlopen + cuGetProcAddress program: governed"
run env CUSLICE_MEM_LIMIT=300MiB "$clients/cs-nvml-query" --json ||
	{ cat "$tmp/out" >&2; fail "cs-nvml-query"; }
grep -q "$limit" "$tmp/out" || { cat "$tmp/out" >&2; fail "NVML's view is not the group's"; }
ok "NVML through its shim: the group's view"

# ---- ld.so.conf, as root in a private mount namespace ----
if [ "$(id -u)" -ne 0 ] || ! unshare --mount true 2>/dev/null; then
	echo "ld.so.conf part skipped: needs root and mount namespaces"
	exit 0
fi
. "$(dirname "$0")/private-etc.sh"
private_etc "$tmp" ld.so.cache ld.so.conf
printf '%s\ninclude /etc/ld.so.conf.d/*.conf\n' "$dir" >"$tmp/etc/ld.so.conf"
# -X: no links made anywhere; -C: the cache into our /etc only.
ldconfig -X -C "$tmp/etc/ld.so.cache" -f "$tmp/etc/ld.so.conf"
# A copy of the dlopen-based client with no RUNPATH or LD_LIBRARY_PATH to help it.
cp "$clients/cs-runtime-loader" "$tmp/loader"
in_private_etc "$tmp" env -u LD_LIBRARY_PATH -u LD_PRELOAD CUSIM_SHM_DIR="$tmp/shm" \
	CUSLICE_SHM_DIR="$tmp/shm" CUSLICE_SOCKET="$tmp/none" CUSLICE_MEM_LIMIT=300MiB "$tmp/loader" \
	>"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "the loader in the ld.so.conf world"; }
grep -q "device 0: .*, $limit bytes" "$tmp/out" ||
	{ cat "$tmp/out" >&2; fail "ld.so.conf: the program did not get the shim"; }
ok "ld.so.conf (ldconfig cache): governed with no LD_LIBRARY_PATH"
