#!/bin/sh
# Checks that a shared library's DT_NEEDED entries are exactly the given
# sonames, in any order: an interposer loaded into every process must not
# drag other libraries (and their constructors) in with it.
#
# usage: check-needed.sh LIBRARY SONAME...
# Exit status: 0 when equal, 1 when not (both lists printed), 2 usage or tool error.
set -eu

if [ $# -lt 2 ]; then
	echo "usage: $0 LIBRARY SONAME..." >&2
	exit 2
fi
lib=$1
shift
if [ ! -f "$lib" ]; then
	echo "$0: no such library: $lib" >&2
	exit 2
fi
dyn=$(readelf -d "$lib") || {
	echo "$0: readelf -d failed on $lib" >&2
	exit 2
}
have=$(printf '%s\n' "$dyn" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p' | sort)
want=$(printf '%s\n' "$@" | sort)
if [ "$have" != "$want" ]; then
	echo "$lib needs:"
	printf '%s\n' "$have" | sed 's/^/  /'
	echo "expected exactly:"
	printf '%s\n' "$want" | sed 's/^/  /'
	exit 1
fi
echo "$lib: NEEDED is exactly:" $want
