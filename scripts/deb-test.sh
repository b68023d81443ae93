#!/bin/sh
# The Debian packages installed, upgraded and removed as an operator would,
# in a fresh Debian 12 root (make deb-check runs it there through
# scripts/fresh-check.sh; never run it on a machine you care about: it
# installs, purges and starts things as root).
#
#   scripts/deb-test.sh V1_DIR V2_DIR
#
# V1_DIR and V2_DIR hold the .deb files of two versions (V2 newer). Steps:
#  1. install V1 on a root without systemd: the cuslice group comes from
#     groupadd, the configuration is a conffile, the daemon starts with it
#     (the socket's group is that group) and the CLI reads its status,
#     NVML's state included; a process under libcuslice registers; a
#     driver directory made by cuslice-driver-dir governs a program;
#  2. install systemd, edit the configuration, upgrade to V2: the edit
#     stays, systemd-sysusers runs, the installed unit verifies with
#     systemd-analyze and rates at most 4.0;
#  3. remove: the programs go, the configuration stays; purge: the
#     configuration and /var/lib/cuslice go, the group stays.
set -eu
v1=$(cd "$1" && pwd)
v2=$(cd "$2" && pwd)
export DEBIAN_FRONTEND=noninteractive
n=0

say() {
	echo "deb-test: $*" >&2
}

fail() {
	say "FAIL: $*"
	exit 1
}

ok() {
	n=$((n + 1))
	say "ok $n: $*"
}

apt_install() {
	apt-get -q -y --no-install-recommends -o Dpkg::Options::=--force-confold install "$@" \
		>/tmp/apt.log 2>&1 || { tail -n 30 /tmp/apt.log >&2; fail "apt-get install $*"; }
}

debs() {
	ls "$1"/cuslice_*.deb "$1"/libcuslice_*.deb "$1"/cusim_*.deb "$1"/cuslice-slurm_*.deb \
		"$1"/cuslice-k8s_*.deb
}

version_of() {
	dpkg-query -W -f='${Version}' "$1" 2>/dev/null
}

# Starts the installed daemon with the installed configuration, checks it
# answers and what it says of NVML, then stops it.
daemon_round() {
	log=/tmp/cusliced.log
	# No metrics port: the root shares the host's network, where 9464 may be taken.
	/usr/sbin/cusliced --config /etc/cuslice/cusliced.conf --metrics-listen none >"$log" 2>&1 &
	pid=$!
	i=0
	until [ -S /run/cuslice/admin/cusliced.sock ] && cuslice status >/tmp/status 2>&1; do
		i=$((i + 1))
		if [ "$i" -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
			cat "$log" >&2
			fail "the installed cusliced did not start with the installed configuration"
		fi
		sleep 0.1
	done
	grep -q '^nvml  *down: libnvidia-ml.so.1 does not load' /tmp/status ||
		{ cat /tmp/status >&2; fail "cuslice status does not show NVML down"; }
	[ "$(stat -c %G /run/cuslice/cusliced.sock)" = cuslice ] ||
		fail "the registration socket's group is not cuslice"
	# A process under libcuslice registers (on cusim's driver) and is listed.
	sim=$(dirname "$(ls /usr/lib/*/cuslice/sim/libcuda.so.1)")
	CUSIM_SHM_DIR=/tmp LD_LIBRARY_PATH="$sim" CUSLICE_GROUP=pkg \
		LD_PRELOAD=$(ls /usr/lib/*/libcuslice.so) /usr/libexec/cuslice/cs-alloc --bytes 1MiB \
		--hold-until-signal >/tmp/alloc.log 2>&1 &
	apid=$!
	i=0
	until grep -qs '^ready' /tmp/alloc.log; do
		i=$((i + 1))
		if [ "$i" -gt 100 ] || ! kill -0 "$apid" 2>/dev/null; then
			cat /tmp/alloc.log >&2
			fail "cs-alloc under libcuslice"
		fi
		sleep 0.1
	done
	cuslice ps >/tmp/ps
	kill -TERM "$apid"
	wait "$apid" || { cat /tmp/alloc.log >&2; fail "cs-alloc exited with $?"; }
	grep -q "^pkg  *$apid " /tmp/ps || { cat /tmp/ps >&2; fail "cuslice ps does not list it"; }
	kill -TERM "$pid"
	wait "$pid" || fail "cusliced exited with status $? on SIGTERM"
}

# ---- 1. install V1, no systemd ----
apt-get -q update >/tmp/apt.log 2>&1 || { tail -n 20 /tmp/apt.log >&2; fail "apt-get update"; }
! command -v systemctl >/dev/null 2>&1 || fail "this root has systemd already"
# shellcheck disable=SC2046 # one word per file
apt_install $(debs "$v1")
ok "installed $(version_of cuslice) on a root without systemd"
getent group cuslice >/dev/null || fail "no cuslice group after install (groupadd)"
ok "group cuslice: $(getent group cuslice)"
unit=/lib/systemd/system/cusliced.service
grep -qx 'ExecStart=/usr/sbin/cusliced --config /etc/cuslice/cusliced.conf' "$unit" ||
	fail "$unit: $(grep ExecStart "$unit")"
dpkg-query -W -f='${Conffiles}\n' cuslice | grep -q ' /etc/cuslice/cusliced.conf ' ||
	fail "/etc/cuslice/cusliced.conf is not a conffile"
for f in /usr/share/man/man8/cusliced.8.gz /usr/share/man/man1/cuslice.1.gz \
	/usr/share/man/man7/libcuslice.7.gz /usr/share/man/man7/cusim.7.gz \
	/usr/lib/sysusers.d/cuslice.conf /usr/lib/tmpfiles.d/cuslice.conf; do
	[ -s "$f" ] || fail "$f missing"
done
zcat /usr/share/man/man8/cusliced.8.gz | grep -q -e '--backstop-interval' ||
	fail "cusliced(8) lacks the options of cusliced --help"
ok "unit (ExecStart in /usr/sbin), conffile, man pages, sysusers.d, tmpfiles.d"
/usr/sbin/cusliced --version >/dev/null || fail "cusliced --version"
daemon_round
ok "the installed daemon runs with the installed configuration; the CLI and libcuslice reach it"
# The driver directory, on the installed cusim as the node's driver, no LD_PRELOAD.
sim=$(dirname "$(ls /usr/lib/*/cuslice/sim/libcuda.so.1)")
cuslice-driver-dir --cuda "$sim/libcuda.so.1" --nvml "$sim/libnvidia-ml.so.1" /opt/cuslice-driver \
	>/dev/null || fail "cuslice-driver-dir"
CUSIM_SHM_DIR=/tmp CUSLICE_DAEMON=off CUSLICE_MEM_LIMIT=300MiB LD_LIBRARY_PATH=/opt/cuslice-driver \
	/usr/libexec/cuslice/cs-alloc --bytes 200MiB --count 2 --expect-oom >/tmp/alloc.log 2>&1 ||
	{ cat /tmp/alloc.log >&2; fail "the driver directory did not govern cs-alloc"; }
rm -rf /opt/cuslice-driver
ok "cuslice-driver-dir: a -lcuda program governed through the installed shims"

# ---- 2. systemd, a local edit, upgrade to V2 ----
apt_install systemd
echo "; edited by the operator" >>/etc/cuslice/cusliced.conf
# shellcheck disable=SC2046
apt_install $(debs "$v2")
[ "$(version_of cuslice)" != "$(basename "$(ls "$v1"/cuslice_*.deb)" | cut -d_ -f2)" ] ||
	fail "still at V1 after the upgrade"
grep -q '^; edited by the operator$' /etc/cuslice/cusliced.conf ||
	fail "the upgrade lost the operator's edit of cusliced.conf"
ok "upgraded to $(version_of cuslice); the operator's edit kept"
systemd-sysusers --dry-run cuslice.conf 2>&1 | grep -qi "creating group" &&
	fail "systemd-sysusers would still create the group"
systemd-analyze verify --man=no "$unit" >/tmp/verify 2>&1 || { cat /tmp/verify >&2; fail "verify"; }
! grep -q cusliced /tmp/verify || { cat /tmp/verify >&2; fail "systemd-analyze verify complains"; }
score=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1 |
	sed -n 's/.*Overall exposure level for cusliced.service: \([0-9.]*\).*/\1/p')
awk -v s="$score" 'BEGIN { exit !(s != "" && s <= 4.0) }' || fail "exposure '$score'"
ok "installed unit: systemd-analyze verify clean, security exposure $score"
daemon_round
ok "V2's daemon runs as V1's did"

# ---- 3. remove, purge ----
apt-get -q -y remove cuslice cuslice-slurm cuslice-k8s >/tmp/apt.log 2>&1 || fail "remove"
[ ! -e /usr/sbin/cusliced ] || fail "cusliced still installed after remove"
[ -f /etc/cuslice/cusliced.conf ] || fail "remove took the configuration"
ok "removed: programs gone, configuration kept"
apt-get -q -y purge cuslice libcuslice cusim >/tmp/apt.log 2>&1 || fail "purge"
[ ! -e /etc/cuslice/cusliced.conf ] || fail "purge left /etc/cuslice/cusliced.conf"
[ ! -e /var/lib/cuslice ] || fail "purge left /var/lib/cuslice"
getent group cuslice >/dev/null || fail "purge removed the cuslice group"
[ -z "$(dpkg -l 'cuslice*' 'libcuslice' 'cusim' 2>/dev/null | awk '/^[ir]/')" ] ||
	fail "packages left: $(dpkg -l 'cuslice*' libcuslice cusim | awk '/^[ir]/')"
ok "purged: configuration and state gone, group kept"
say "passed ($n checks)"
