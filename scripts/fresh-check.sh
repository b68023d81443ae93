#!/bin/sh
# The README's promise, proven on a fresh machine (make fresh-check).
#
# Makes a minimal Debian 12 root with debootstrap (minbase, plus make: the
# README's prerequisites are make and the CUDA toolkit), puts a clean clone
# of HEAD in it under /root (mode 0700: nothing may depend on where the
# checkout lives, not even the tests that drop to another uid), bind-mounts
# the CUDA toolkit read-only where NVIDIA's installer puts it, and runs the
# README's two commands there as root, from an empty environment:
#
#     make test && make demo
#
# The root and its mounts (/proc, /sys, /dev, a fresh /dev/shm, the toolkit,
# apt's package cache) live in private mount and PID namespaces: the mounts
# exist only there and vanish with the namespace's last process, however the
# run ends (failure, ^C, kill -9), and nothing started in the root outlives
# it. The host's /dev/shm (other users' cusim instances) stays out.
#
# usage: scripts/fresh-check.sh    (--inside ... is its own second stage)
# Environment:
#   CUDA_TOOLKIT   the toolkit to mount (default /usr/local/cuda)
#   FRESH_CACHE    the cache (default .cache/fresh in the checkout)
#   FRESH_MIRROR   the Debian mirror (default: the one apt uses here for bookworm)
#   FRESH_COMMANDS what to run in the checkout (default: make test && make demo)
#   FRESH_FILES    a directory copied into the root as /root/files before the
#                  commands run (make deb-check: the packages to install)
#
# The cache keeps the debootstrapped root as a tarball (made once, in a few
# minutes) and the packages apt downloads in the root (so a later run fetches
# only the package lists); every run unpacks a new root, so scripts/deps.sh
# starts from nothing each time. rm -r the cache to start over. The tests'
# log is kept in FRESH_CACHE/testlog.txt; a failed run's root stays in
# FRESH_CACHE/root for inspection until the next run.
#
# Exit status: 0 when the commands passed, or when the check cannot run here
# (skipped: not root, no namespaces, no mirror; the reason is printed);
# 1 when they failed or the root could not be made.
set -eu

suite=bookworm
# The README's prerequisites besides the toolkit (which is mounted).
include="make"
# What the README's commands must not install: a Prometheus server for its
# promtool, the fuzzing tools, this check's own tools (not checked when
# FRESH_COMMANDS replaces the README's commands).
unwanted="prometheus clang libclang-rt-14-dev debootstrap"

# Run in the root by the namespace's PID 1 shell, which reaps orphans as init
# does while it waits: the commands ($1), then the packages ($2) they must
# not have installed. It holds the cache's lock (fd 9) for as long as the
# namespace lives; the commands do not get it.
# shellcheck disable=SC2016 # expanded in the root
in_root='cd /root/cuslice || exit 1
sh -c "$1" 9>&- || exit 1
for p in $2; do
	case $(dpkg-query -W -f="\${db:Status-Abbrev}" "$p" 2>/dev/null) in
	ii*) echo "fresh-check: the commands installed $p, which they do not need" >&2; exit 1 ;;
	esac
done
exit 0'

say() {
	echo "fresh-check: $*" >&2
}

skip() {
	say "skipped: $*"
	exit 0
}

die() {
	say "$*"
	exit 1
}

# Mount points at or under $1 in this mount namespace, one per line.
mounts_under() {
	awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo
}

# Removes the directory $1 made by an earlier run, refusing while anything is
# mounted under it (rm would descend into a bind mount of the same file system).
remove_root() {
	[ -e "$1" ] || return 0
	m=$(mounts_under "$1")
	[ -z "$m" ] || die "still mounted under $1, not removing it: $m"
	rm -rf --one-file-system "$1"
}

# ---- inside the namespaces: mount, run, and let the namespaces unmount ----
if [ "${1-}" = --inside ]; then
	root=$2 toolkit_real=$3 archives=$4 shm_kb=$5 commands=$6 unwanted=$7
	# The root becomes this mount namespace's own root below (pivot_root, not
	# chroot: the kernel refuses user namespaces to a chrooted process, and
	# tests make some); it must be a mount point, under which the rest goes.
	mount --bind "$root" "$root"
	mount -t proc proc "$root/proc"
	mount --rbind /sys "$root/sys"
	mount --rbind /dev "$root/dev"
	# A /dev/shm of its own, as large as the host's: cusim keeps device memory there.
	mount -t tmpfs -o "mode=1777,nosuid,nodev,size=${shm_kb}k" tmpfs "$root/dev/shm"
	mount --bind "$toolkit_real" "$root$toolkit_real"
	mount -o remount,bind,ro "$root$toolkit_real"
	mount --bind "$archives" "$root/var/cache/apt/archives"
	cd "$root"
	# pivot_root(2)'s own recipe: the old root lands on top of the new one; detach it.
	pivot_root . .
	umount -l .
	# What root's login shell on a fresh machine has, and nothing of ours.
	exec /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/sh \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		TERM="${TERM:-dumb}" \
		/bin/sh -c "$in_root" sh "$commands" "$unwanted"
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
toolkit=${CUDA_TOOLKIT:-/usr/local/cuda}
cache=${FRESH_CACHE:-$repo/.cache/fresh}
commands=${FRESH_COMMANDS:-make test && make demo}
[ -z "${FRESH_COMMANDS-}" ] || unwanted=""
start=$(date +%s)

# ---- can it run here? ----
[ "$(id -u)" -eq 0 ] || skip "debootstrap and mounts need root (sudo make fresh-check)"
unshare --mount --pid --fork --kill-child true 2>/dev/null ||
	skip "cannot make mount and PID namespaces here (a container without CAP_SYS_ADMIN?)"
if [ ! -f "$toolkit/include/cuda.h" ] || [ ! -x "$toolkit/bin/nvcc" ]; then
	die "no CUDA toolkit at $toolkit (the README's prerequisite); set CUDA_TOOLKIT=DIR"
fi
toolkit_real=$(readlink -f "$toolkit")
# shellcheck disable=SC2016 # $(REPO_URI) is apt's, not the shell's
mirror=${FRESH_MIRROR:-$(apt-get indextargets --no-release-info --format '$(REPO_URI)' \
	"Release: $suite" 'Identifier: Packages' 'Component: main' 2>/dev/null | head -n 1)}
mirror=${mirror:-http://deb.debian.org/debian/}
mirror=${mirror%/}
probe=$(mktemp -d)
if ! /usr/lib/apt/apt-helper download-file "$mirror/dists/$suite/Release" "$probe/Release" \
	>/dev/null 2>&1; then
	rm -rf "$probe"
	skip "the Debian mirror $mirror cannot be reached (no network?); set FRESH_MIRROR"
fi
rm -rf "$probe"
"$repo/scripts/deps.sh" fresh

mkdir -p "$cache/archives"
exec 9>"$cache/lock"
flock -n 9 || die "another fresh-check is running on $cache"
commit=$(git -C "$repo" rev-parse --short HEAD)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
	say "checking the commit $commit: uncommitted changes are not part of it"
fi

# ---- the root: the cached debootstrap, unpacked anew ----
base=$cache/$suite-minbase-$include.tar.gz
root=$cache/root
remove_root "$root"
t=$(date +%s)
if [ ! -f "$base" ]; then
	say "debootstrap $suite (minbase, $include) from $mirror into the cache"
	remove_root "$cache/base"
	# In a mount namespace of its own: the /proc and /sys it mounts cannot stay behind.
	unshare --mount --propagation private \
		debootstrap --variant=minbase --include="$include" "$suite" "$cache/base" "$mirror" \
		>"$cache/debootstrap.log" 2>&1 ||
		die "debootstrap failed; see $cache/debootstrap.log"
	tar -C "$cache/base" --numeric-owner -czf "$base.tmp" .
	mv "$base.tmp" "$base"
	remove_root "$cache/base"
	how="made"
else
	how="cached"
fi
mkdir "$root"
tar -C "$root" --numeric-owner -xzf "$base"
say "root: $how and unpacked in $(($(date +%s) - t)) s"

# The machine's network settings; what the installer writes on a real machine.
cp /etc/resolv.conf "$root/etc/resolv.conf"
[ -s "$root/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\t\tlocalhost\n' \
	"$(cat "$root/etc/hostname" 2>/dev/null || hostname)" >"$root/etc/hosts"
http_proxy=$(apt-config shell p Acquire::http::Proxy | sed -n "s/^p='\(.*\)'$/\1/p")
[ -z "$http_proxy" ] ||
	echo "Acquire::http::Proxy \"$http_proxy\";" >"$root/etc/apt/apt.conf.d/01proxy"

# The toolkit where it is here (e.g. /usr/local/cuda -> cuda-13.0).
mkdir -p "$root$toolkit_real"
if [ "$toolkit_real" != "$toolkit" ]; then
	mkdir -p "$(dirname "$root$toolkit")"
	ln -s "$toolkit_real" "$root$toolkit"
fi

# A clean clone of HEAD, as a user gets it, under /root (mode 0700).
chmod 0700 "$root/root"
git init -q "$root/root/cuslice"
git -C "$repo" push -q "$root/root/cuslice" "HEAD:refs/heads/fresh-check"
git -C "$root/root/cuslice" checkout -q fresh-check

if [ -n "${FRESH_FILES-}" ]; then
	cp -r "$FRESH_FILES" "$root/root/files"
fi

# ---- the README's two commands ----
say "$commands: in a fresh Debian 12 root, as root, in /root/cuslice ($commit)"
rm -f "$cache/testlog.txt"
t=$(date +%s)
if unshare --mount --pid --fork --kill-child --propagation private \
	"$repo/scripts/fresh-check.sh" --inside "$root" "$toolkit_real" "$cache/archives" \
	"$(df -Pk /dev/shm | awk 'NR == 2 { print $2 }')" "$commands" "$unwanted"; then
	status=0
else
	status=$?
fi
took=$(($(date +%s) - t))
total=$(($(date +%s) - start))
# The tests' log, kept past the root.
cp "$root/root/cuslice/build/meson-logs/testlog.txt" "$cache/testlog.txt" 2>/dev/null || true
summary="$(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit: $commands: $((took / 60))m$((took % 60))s, whole check $((total / 60))m$((total % 60))s (root $how)"
if [ "$status" -ne 0 ]; then
	say "FAILED (exit $status): $summary"
	say "the root stays in $root for inspection (removed by the next run)"
	exit 1
fi
remove_root "$root"
say "passed: $summary"
