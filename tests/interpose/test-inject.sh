#!/bin/sh
# Injection modes (docs/injection.md), with real processes:
#
#   test-inject.sh LIBCUSLICE
#   (environment: CS_CLIENTS_DIR, LD_LIBRARY_PATH with cusim, as ti_env)
#
# 1. LD_PRELOAD in the environment; env -i keeping only cuslice's
#    variables: PATH, LD_PRELOAD and LD_LIBRARY_PATH repaired at start,
#    nested shells unchanged (idempotent);
# 2. CUSLICE_DISABLE=1: the library reads no configuration (a 1 MiB limit
#    does not stop a 2 MiB allocation that it stops otherwise);
# 3. as root, in a private mount namespace whose /etc has an ld.so.preload
#    naming the library (the node-wide mode, without touching the node's
#    /etc): a scrubbed environment repaired in a shell and its nested
#    shells; a program named in CUSLICE_PRELOAD_SKIP or in
#    /etc/cuslice/preload-skip left untouched while the shell beside it is
#    repaired; a set-uid program untouched (secure_getenv) while the same
#    program without the bit is repaired.
# Part 3 is skipped with a message when not root or without mount namespaces.
set -eu
lib=$1
alloc=$CS_CLIENTS_DIR/cs-alloc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
n=0

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

check() {
	[ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
	n=$((n + 1))
	echo "ok $n: $1"
}

# ---- 1. LD_PRELOAD, env -i ----
# shellcheck disable=SC2016 # expanded by the shell that runs it
echo 'echo "$PATH|$LD_PRELOAD|$LD_LIBRARY_PATH"' >"$tmp/show.sh"
show="/bin/sh $tmp/show.sh"
out=$(env -i CUSLICE_PATH=/usr/bin:/bin CUSLICE_PREPEND_PATH=/opt/cs/bin \
	CUSLICE_PREPEND_LD_LIBRARY_PATH=/opt/cs/lib:/opt/cs/lib2 CUSLICE_PREPEND_LD_PRELOAD="$lib" \
	LD_PRELOAD="$lib" /bin/sh -c "$show")
check "env -i: PATH from CUSLICE_PATH with CUSLICE_PREPEND_PATH in front, LD_LIBRARY_PATH made" \
	"$out" "/opt/cs/bin:/usr/bin:/bin|$lib|/opt/cs/lib:/opt/cs/lib2"
out=$(env -i CUSLICE_PREPEND_PATH=/opt/cs/bin:/usr/bin PATH=/usr/bin:/bin \
	LD_LIBRARY_PATH=/x CUSLICE_PREPEND_LD_LIBRARY_PATH=/x LD_PRELOAD="$lib" \
	/bin/sh -c "sh -c '$show'")
check "nested shells: each entry once, the ones present left where they are" \
	"$out" "/opt/cs/bin:/usr/bin:/bin|$lib|/x"
out=$(env -i PATH=/usr/bin:/bin LD_PRELOAD="$lib" /bin/sh -c "$show")
check "no CUSLICE_ variables: nothing changes" "$out" "/usr/bin:/bin|$lib|"

# ---- 2. CUSLICE_DISABLE ----
mkdir "$tmp/shm"
run_alloc() {
	env CUSIM_SHM_DIR="$tmp/shm" CUSLICE_SHM_DIR="$tmp/shm" CUSLICE_SOCKET="$tmp/none" \
		CUSLICE_MEM_LIMIT=1MiB LD_PRELOAD="$lib" "$@" "$alloc" --bytes 2MiB >"$tmp/alloc" 2>&1
}
if run_alloc; then
	cat "$tmp/alloc" >&2
	fail "2 MiB allocated under a 1 MiB limit"
fi
run_alloc CUSLICE_DISABLE=1 || { cat "$tmp/alloc" >&2; fail "CUSLICE_DISABLE=1: cs-alloc failed"; }
check "CUSLICE_DISABLE=1: the limit is not even read" ok ok
CUSLICE_DISABLE=yes LD_PRELOAD="$lib" /bin/true 2>"$tmp/err"
grep -q 'CUSLICE_DISABLE="yes": accepted: 1 (leave this program alone) or 0; staying on' \
	"$tmp/err" || { cat "$tmp/err" >&2; fail "no message for CUSLICE_DISABLE=yes"; }
check "CUSLICE_DISABLE=yes: refused with the accepted forms, library stays on" ok ok

# ---- 3. /etc/ld.so.preload ----
if [ "$(id -u)" -ne 0 ] || ! unshare --mount true 2>/dev/null; then
	echo "ld.so.preload part skipped: needs root and mount namespaces"
	exit 0
fi
# The library where any user may read it (the checkout may be in /root).
cp "$lib" "$tmp/libcuslice.so"
lib=$tmp/libcuslice.so
# /etc as a farm of links to the real one, plus ours.
. "$(dirname "$0")/private-etc.sh"
private_etc "$tmp" ld.so.preload cuslice
echo "$lib" >"$tmp/etc/ld.so.preload"
mkdir "$tmp/etc/cuslice"
printf '# programs left alone\n  printenv  # coreutils\n' >"$tmp/etc/cuslice/preload-skip"
cp /usr/bin/env "$tmp/env-suid"
cp /usr/bin/env "$tmp/env-plain"
chmod 4755 "$tmp/env-suid"

# in_world CMD...: CMD with the farm as /etc.
in_world() {
	in_private_etc "$tmp" "$@"
}

out=$(in_world env -i /bin/sh -c 'cat /proc/self/maps' | grep -c "$(basename "$lib")" || true)
[ "$out" -gt 0 ] || fail "the library is not in a program's maps with ld.so.preload"
check "ld.so.preload: the library is in every program" ok ok
out=$(in_world env -i CUSLICE_PREPEND_PATH=/opt/cs/bin CUSLICE_PREPEND_LD_PRELOAD="$lib" \
	/bin/sh -c "$show; /bin/sh -c '$show'")
check "ld.so.preload, env -i: repaired in the shell and its nested shell" "$out" \
	"/opt/cs/bin|$lib|
/opt/cs/bin|$lib|"
out=$(in_world env -i PATH=/usr/bin:/bin CUSLICE_PREPEND_PATH=/opt/cs/bin CUSLICE_PRELOAD_SKIP=x,env \
	/usr/bin/env | grep '^PATH=')
check "CUSLICE_PRELOAD_SKIP names the program: untouched" "$out" "PATH=/usr/bin:/bin"
out=$(in_world env -i PATH=/usr/bin:/bin CUSLICE_PREPEND_PATH=/opt/cs/bin CUSLICE_PRELOAD_SKIP=x,env \
	/bin/sh -c 'echo $PATH')
check "CUSLICE_PRELOAD_SKIP: a program it does not name is repaired" "$out" "/opt/cs/bin:/usr/bin:/bin"
out=$(in_world env -i PATH=/usr/bin:/bin CUSLICE_PREPEND_PATH=/opt/cs/bin /usr/bin/printenv PATH)
check "/etc/cuslice/preload-skip names the program: untouched" "$out" "/usr/bin:/bin"
out=$(in_world env -i PATH=/usr/bin:/bin CUSLICE_PREPEND_PATH=/opt/cs/bin CUSLICE_DISABLE=1 \
	/bin/sh -c 'echo $PATH')
check "CUSLICE_DISABLE=1 under ld.so.preload: untouched" "$out" "/usr/bin:/bin"
if findmnt -no OPTIONS --target "$tmp" | grep -qw nosuid; then
	echo "set-uid part skipped: $tmp is on a nosuid mount"
	exit 0
fi
for p in plain suid; do
	out=$(in_world setpriv --reuid 65534 --regid 65534 --clear-groups \
		env -i PATH=/usr/bin:/bin CUSLICE_PREPEND_PATH=/opt/cs/bin "$tmp/env-$p" | grep '^PATH=')
	case $p in
	plain) check "a program of another user: repaired" "$out" "PATH=/opt/cs/bin:/usr/bin:/bin" ;;
	suid) check "a set-uid program: untouched (secure_getenv)" "$out" "PATH=/usr/bin:/bin" ;;
	esac
done
