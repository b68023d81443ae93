#!/bin/sh
# Checks that a shared library exports exactly the symbols listed in one or
# more .def files (lines "X(name)", "X(name, ...)" or "G(name)"), nothing more and
# nothing less. An exported internal helper can override the host program's
# own symbol of the same name; a missing one breaks callers at load time.
#
# usage: check-exports.sh LIBRARY DEFFILE...
# Exit status: 0 when the sets are equal, 1 when they differ (both
# differences are listed), 2 for a usage or tool error.
set -eu

if [ $# -lt 2 ]; then
	echo "usage: $0 LIBRARY DEFFILE..." >&2
	exit 2
fi
lib=$1
shift
if [ ! -f "$lib" ]; then
	echo "$0: no such library: $lib" >&2
	exit 2
fi
for def in "$@"; do
	if [ ! -f "$def" ]; then
		echo "$0: no such def file: $def" >&2
		exit 2
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols, without glibc's version nodes (e.g. "@@LIBCUDA").
nm -D --defined-only "$lib" >"$tmp/nm" || {
	echo "$0: nm -D failed on $lib" >&2
	exit 2
}
awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" | sort -u >"$tmp/exported"

# X(name) and G(name) lines; comments and other lines are ignored.
sed -n 's/^[[:space:]]*[XG]([[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$@" |
	sort -u >"$tmp/listed"

comm -13 "$tmp/listed" "$tmp/exported" >"$tmp/extra"
comm -23 "$tmp/listed" "$tmp/exported" >"$tmp/missing"
nlisted=$(wc -l <"$tmp/listed")
nexported=$(wc -l <"$tmp/exported")

status=0
if [ -s "$tmp/extra" ]; then
	echo "$lib exports $(wc -l <"$tmp/extra") symbol(s) not listed in $*:"
	sed 's/^/  + /' "$tmp/extra"
	status=1
fi
if [ -s "$tmp/missing" ]; then
	echo "$lib lacks $(wc -l <"$tmp/missing") symbol(s) listed in $*:"
	sed 's/^/  - /' "$tmp/missing"
	status=1
fi
if [ "$nlisted" -eq 0 ]; then
	echo "no X(name) or G(name) lines found in $*"
	status=1
fi
if [ $status -eq 0 ]; then
	echo "$lib: exports exactly the $nexported symbols listed in $*"
fi
exit $status
