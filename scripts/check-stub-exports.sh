#!/bin/sh
# Checks that a driver library exports every function the toolkit's link
# stub (lib64/stubs/libcuda.so) exports: a program linked against the stub,
# or loading any of those names, finds all of them.
#
# usage: check-stub-exports.sh LIBRARY STUB
# Exit status: 0 when every stub export is exported, 1 when some are missing
# (listed), 2 for a usage or tool error.
set -eu

if [ $# -ne 2 ] || [ ! -f "$1" ] || [ ! -f "$2" ]; then
	echo "usage: $0 LIBRARY STUB (both existing files)" >&2
	exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

exports() {
	nm -D --defined-only "$1" >"$tmp/nm" || {
		echo "$0: nm -D failed on $1" >&2
		exit 2
	}
	awk 'NF >= 3 && $2 ~ /^[TtWi]$/ { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" | sort -u
}
exports "$1" >"$tmp/lib"
exports "$2" >"$tmp/stub"
comm -13 "$tmp/lib" "$tmp/stub" >"$tmp/missing"
if [ ! -s "$tmp/stub" ]; then
	echo "$2 exports no functions"
	exit 1
fi
if [ -s "$tmp/missing" ]; then
	echo "$1 lacks $(wc -l <"$tmp/missing") of the $(wc -l <"$tmp/stub") functions $2 exports:"
	sed 's/^/  - /' "$tmp/missing"
	exit 1
fi
echo "$1 exports all $(wc -l <"$tmp/stub") functions of $2 (and $(comm -23 "$tmp/lib" "$tmp/stub" | wc -l) more)"
