#!/bin/sh
# Checks that a library's exported dlsym hands lookups to libc's dlsym by a
# tail call: its code has an indirect jump (the tail call through the
# pointer to libc's dlsym) and no indirect call. An indirect call there would
# make the library, not its caller, the caller libc sees: dlsym(RTLD_NEXT)
# from another interposer would find that interposer's own symbol again.
#
# usage: check-tailcall.sh LIBRARY [SYMBOL]   (default SYMBOL: dlsym)
# Exit status: 0 tail call, 1 not, 2 usage or tool error, 77 (skip) on an
# architecture this script does not know.
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 LIBRARY [SYMBOL]" >&2
	exit 2
fi
lib=$1
sym=${2:-dlsym}
case $(uname -m) in
x86_64) ijmp='jmp[[:space:]]+\*%' icall='call[[:space:]]+\*' ;;
aarch64) ijmp='[[:space:]]br[[:space:]]+x' icall='[[:space:]]blr[[:space:]]' ;;
*)
	echo "$0: no check for $(uname -m)"
	exit 77
	;;
esac
code=$(objdump -d --no-show-raw-insn --disassemble="$sym" "$lib") || {
	echo "$0: objdump failed on $lib" >&2
	exit 2
}
body=$(printf '%s\n' "$code" | sed -n "/<$sym>:/,/^\$/p")
if [ -z "$body" ]; then
	echo "$0: $lib has no code for $sym" >&2
	exit 2
fi
if ! printf '%s\n' "$body" | grep -Eq "$ijmp"; then
	echo "$lib: $sym has no indirect jump (no tail call to libc's dlsym):"
	printf '%s\n' "$body"
	exit 1
fi
if printf '%s\n' "$body" | grep -Eq "$icall"; then
	echo "$lib: $sym calls through a pointer (libc's dlsym would see $lib as its caller):"
	printf '%s\n' "$body"
	exit 1
fi
echo "$lib: $sym ends in a tail call"
