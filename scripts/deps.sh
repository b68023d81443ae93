#!/bin/sh
# Installs what building and testing cuslice needs on Debian 12, by group:
#
#   scripts/deps.sh [GROUP...]        (no GROUP: build)
#
# Idempotent, and silent and quick when everything is there (one dpkg-query,
# no apt). Installing packages needs root: run it as root, or as a user who
# may use sudo; otherwise it prints the apt-get command to run as root and
# exits 1.
#
# A group is one line below: the Debian packages it needs, and @NAME for a
# tool apt does not install as such (have_NAME and get_NAME further down).
# Adding a group is adding a line; name it on the command line.
# shellcheck disable=SC2034 # the group_* lines are read through eval
set -eu

# build: `make`, `make test`, `make demo`. make; meson, ninja, pkg-config;
# python3 (the code generators); gcc, libc6-dev; g++ (nvcc compiles the test
# kernels with it); binutils (nm, readelf: the export tests); util-linux
# (setpriv, unshare: the other-uid and PID-namespace tests); the libraries
# the programs link; @promtool (checks the metrics format); valgrind (the
# benchmarks count instructions per call with callgrind); Slurm, munge and
# libslurm-dev (the SPANK plugin is built against spank.h, and its tests start
# a private single-node cluster; installed without starting their services);
# gRPC C-core, protobuf-c and openssl (the Kubernetes plugins; openssl makes
# the tests' CA); @node and @k8s_js (node and the npm packages, from the
# committed lockfile, of the fake kubelet and API server in tests/k8s/js);
# the OpenGL, EGL and VDPAU headers (cusim's interop entry points are
# declared with the toolkit's cudaGL.h, cudaEGL.h and cudaVDPAU.h); chromium
# (headless: the daemon's status page is rendered in it, tests/system); zsh
# (the CLI's zsh completion is parsed, tests/cli).
group_build="make meson ninja-build pkg-config python3 gcc libc6-dev g++ binutils util-linux libcmocka-dev libcjson-dev libmicrohttpd-dev libinih-dev libsmartcols-dev libcurl4-openssl-dev valgrind slurmd slurmctld slurm-client libslurm-dev munge libgrpc-dev libprotobuf-c-dev protobuf-c-compiler openssl libgl-dev libegl-dev libvdpau-dev chromium zsh @promtool @node @k8s_js"
# fuzz: `make fuzz`. clang, and its libFuzzer and sanitizer runtimes, which Debian 12 ships apart.
group_fuzz="clang libclang-rt-14-dev"
# fresh: `make fresh-check` builds a fresh Debian 12 root to run the README's commands in.
group_fresh="debootstrap"
# compat: `make compat`, the third-party programs of the compatibility suite (docs/compat.md).
group_compat="python3-numba ffmpeg hashcat"

root=$(cd "$(dirname "$0")/.." && pwd)
# Tools fetched into the project (ignored by git) rather than installed on the machine.
cache=$root/.cache/deps

usage() {
	echo "usage: $0 [GROUP...]   groups: $(sed -n 's/^group_\([a-z0-9_]*\)=.*/\1/p' "$0" | tr '\n' ' ')" >&2
	exit 2
}

say() {
	echo "deps: $*" >&2
}

# Sets runner to what runs a command as root: "" as root, "sudo" where there
# is sudo. Where there is neither, prints $1 (what to run as root) and exits 1.
need_root() {
	if [ "$(id -u)" -eq 0 ]; then
		runner=""
	elif command -v sudo >/dev/null 2>&1; then
		runner="sudo"
	else
		say "installing needs root, and there is no sudo here. As root, run:"
		echo "    $1" >&2
		# MAKELEVEL: run by make, whose command is what to run again.
		say "then run ${MAKELEVEL:+make}${MAKELEVEL:-$0} again."
		exit 1
	fi
}

# Runs apt-get with the arguments as root (need_root first); on failure says
# what to run by hand ($todo) and exits 1.
apt_get() {
	# Waits for another apt or dpkg (another engineer's install) instead of failing.
	if ! $runner env DEBIAN_FRONTEND=noninteractive \
		apt-get -q -o DPkg::Lock::Timeout=600 "$@" >/dev/null; then
		say "apt-get $1 failed (see above). As root, run:"
		echo "    $todo" >&2
		exit 1
	fi
}

# promtool checks the metrics format in the tests. Debian ships it only inside
# the prometheus package, a whole server (96 MB) whose installation adds a
# system user and enables a service. The tests need the one binary: it is
# taken from the package apt downloads and verifies (no root needed, nothing
# installed on the machine) into $cache/bin, where the build looks for it. A
# promtool already on PATH is used as it is. To refresh: rm -r .cache/deps.
have_promtool() {
	command -v promtool >/dev/null 2>&1 || [ -x "$cache/bin/promtool" ]
}

get_promtool() {
	tmp=$(mktemp -d)
	# apt downloads as the unprivileged _apt user where it can write.
	chmod 0755 "$tmp"
	if [ "$(id -u)" -eq 0 ]; then
		chown _apt "$tmp" 2>/dev/null || true
	fi
	say "fetching promtool from Debian's prometheus package into $cache/bin"
	if ! (cd "$tmp" && apt-get download -q prometheus >/dev/null 2>&1); then
		# No package lists yet (a fresh machine): fetch them, then try again.
		todo="apt-get update"
		need_root "$todo"
		apt_get update
		(cd "$tmp" && apt-get download -q prometheus >/dev/null)
	fi
	dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool
	"$tmp/usr/bin/promtool" --version >/dev/null 2>&1 || {
		say "promtool from the prometheus package does not run"
		rm -rf "$tmp"
		exit 1
	}
	mkdir -p "$cache/bin"
	mv "$tmp/usr/bin/promtool" "$cache/bin/promtool"
	rm -rf "$tmp"
}

# node (18 or newer: Debian's is enough) runs the Kubernetes tests' fake
# kubelet and API server. A node already installed (another distribution's
# package, which carries its own npm) is used as it is.
have_node() {
	command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1
}

get_node() {
	todo="apt-get update && apt-get install -y --no-install-recommends nodejs npm"
	need_root "$todo"
	say "installing nodejs npm"
	apt_get update
	apt_get install -y --no-install-recommends nodejs npm
}

# The npm packages of tests/k8s/js, exactly as locked (npm ci); again when the
# lockfile is newer than what npm ci left.
k8s_js=$root/tests/k8s/js
have_k8s_js() {
	[ -f "$k8s_js/node_modules/.package-lock.json" ] &&
		[ ! "$k8s_js/package-lock.json" -nt "$k8s_js/node_modules/.package-lock.json" ]
}

get_k8s_js() {
	say "npm ci in tests/k8s/js"
	(cd "$k8s_js" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

[ $# -eq 0 ] && set -- build
pkgs=""
tools=""
for g in "$@"; do
	case $g in
	*[!a-z0-9_]* | "") usage ;;
	esac
	eval "items=\${group_$g-}"
	[ -n "$items" ] || usage
	for i in $items; do
		case $i in
		@*) tools="$tools ${i#@}" ;;
		*) pkgs="$pkgs $i" ;;
		esac
	done
done

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
	say "this installs Debian packages with apt-get, which this system lacks."
	say "Install the equivalents of:$pkgs$tools"
	exit 1
fi

# Every package in one query; a package never seen by dpkg is not listed.
# shellcheck disable=SC2086
installed=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' $pkgs 2>/dev/null |
	awk '$2 == "ii" { print $1 }') || true
missing=""
for p in $pkgs; do
	printf '%s\n' "$installed" | grep -qx "$p" || missing="$missing $p"
done

if [ -n "$missing" ]; then
	todo="apt-get update && apt-get install -y --no-install-recommends$missing"
	need_root "$todo"
	say "installing$missing"
	apt_get update
	# Packages with system services (munge, Slurm: their tests start private
	# instances) must not start them: a policy-rc.d that refuses every start
	# is in place for the install only, unless the machine has one already.
	policy=/usr/sbin/policy-rc.d
	own_policy=""
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# scripts/deps.sh: no service starts while packages install\nexit 101\n' |
			$runner tee "$policy" >/dev/null
		$runner chmod 755 "$policy"
		own_policy=1
	fi
	rc=0
	# shellcheck disable=SC2086
	(apt_get install -y --no-install-recommends $missing) || rc=$?
	[ -z "$own_policy" ] || $runner rm -f "$policy"
	[ "$rc" -eq 0 ] || exit "$rc"
fi

for t in $tools; do
	"have_$t" || "get_$t"
done
