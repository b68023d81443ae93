#!/bin/sh
# cusliced.service as the build made it (tests/service, suite service):
#
#   check-unit.sh UNIT EXPECTED_EXECSTART_PROGRAM BUILT_CUSLICED
#
# - ExecStart names the program where the install puts it (the prefix's sbin);
# - `systemd-analyze verify` is clean (with ExecStart pointed at the built
#   program, which exists here; the installed path is checked by the
#   package test in the fresh root);
# - `systemd-analyze security` rates it at most 4.0 (OK), and the
#   capabilities it keeps are exactly the four the daemon needs.
# Skipped (77) where systemd-analyze is missing.
set -eu
unit=$1 want=$2 built=$3
command -v systemd-analyze >/dev/null 2>&1 || { echo "no systemd-analyze: skipped"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ "${exec_start%% *}" = "$want" ] || fail "ExecStart is '$exec_start', expected $want ..."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=[^ ]*|ExecStart=$built|" "$unit" >"$tmp/cusliced.service"
# --man=no: the man page is checked by the package test, where it is installed.
if ! systemd-analyze verify --man=no "$tmp/cusliced.service" >"$tmp/verify" 2>&1; then
	cat "$tmp/verify" >&2
	fail "systemd-analyze verify"
fi
# Any complaint about our unit counts, even with status 0.
if grep -i "cusliced.service" "$tmp/verify" >&2; then
	fail "systemd-analyze verify printed the above"
fi

systemd-analyze security --offline=true --no-pager "$tmp/cusliced.service" >"$tmp/sec" 2>&1 ||
	{ cat "$tmp/sec" >&2; fail "systemd-analyze security"; }
score=$(sed -n 's/.*Overall exposure level for cusliced.service: \([0-9.]*\).*/\1/p' "$tmp/sec")
[ -n "$score" ] || { cat "$tmp/sec" >&2; fail "no exposure level in systemd-analyze security's output"; }
echo "systemd-analyze security: exposure $score"
awk -v s="$score" 'BEGIN { exit !(s <= 4.0) }' || { cat "$tmp/sec" >&2; fail "exposure $score > 4.0"; }

caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit" | tr ' ' '\n' | sort | tr '\n' ' ')
[ "$caps" = "CAP_CHOWN CAP_DAC_READ_SEARCH CAP_KILL CAP_SYS_PTRACE " ] ||
	fail "CapabilityBoundingSet is '$caps'"
grep -q '^Type=notify$' "$unit" || fail "not Type=notify"
echo "ok: $unit"
