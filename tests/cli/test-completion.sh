#!/bin/bash
# The shell completions of contrib/completion: bash's answers for typical
# command lines (exact COMPREPLY), group names from the daemon through a
# stand-in `cuslice` function, and every command and option it offers one
# that `cuslice --help` documents; zsh's file parses (`zsh -n`, skipped
# without zsh).
#   test-completion.sh SOURCE_ROOT CUSLICE
set -u
root=$1
cli=$2
fail=0

# shellcheck source=../../contrib/completion/cuslice.bash
source "$root/contrib/completion/cuslice.bash"

# The daemon's groups, as `cuslice --no-headers groups` prints them; records its arguments.
cuslice() {
	printf '%s\n' "$*" >>"$calls"
	printf 'train   yes 2 0 4.00 GiB\npid-7   no  1 0 1.00 GiB\ntrain   yes 2 1 0 B\n'
}
calls=$(mktemp)
trap 'rm -f "$calls"' EXIT

# expect 'LINE' 'WANT...': completes LINE (the cursor at its end) and compares.
expect() {
	local line=$1 want=$2 got
	read -r -a COMP_WORDS <<<"$line"
	[[ $line == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMP_LINE=$line
	COMP_POINT=${#line}
	COMPREPLY=()
	_cuslice
	got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')
	want=$(printf '%s\n' $want | sort | tr '\n' ' ')
	if [[ $got != "$want" ]]; then
		echo "FAIL: '$line': got '$got', wanted '$want'"
		fail=1
	fi
}

expect 'cuslice ' 'run self ps gpus groups set delete top status help'
expect 'cuslice g' 'gpus groups'
expect 'cuslice --' '--admin-socket --socket --output --no-headers --help --version'
expect 'cuslice -o ' 'table wide json yaml'
expect 'cuslice ps --output y' 'yaml'
expect 'cuslice ps --' '--output --no-headers --help'
expect 'cuslice top -o json --n' '--no-headers'
expect 'cuslice set ' 'pid-7 train'
expect 'cuslice set train --' '--mem --cores --burst --hard --required --optional --output --no-headers --help'
expect 'cuslice delete t' 'train'
expect 'cuslice run --group ' 'pid-7 train'
expect 'cuslice run --mem ' ''
expect 'cuslice self --group p' 'pid-7'
expect 'cuslice help s' 'self set status'
: >"$calls"
expect 'cuslice --admin-socket /tmp/a.sock groups ' 'pid-7 train'
if [[ $(cat "$calls") != "--admin-socket /tmp/a.sock --no-headers groups" ]]; then
	echo "FAIL: the groups were asked as '$(cat "$calls")', not on the admin socket given"
	fail=1
fi

# Everything offered is documented: commands and options in `cuslice --help`.
unset -f cuslice
help=$("$cli" --help)
for w in run self ps gpus groups set delete top status \
	--admin-socket --socket --output --no-headers --version \
	--mem --cores --gpu --group --burst --hard --required --optional; do
	if ! grep -q -- "$w" <<<"$help"; then
		echo "FAIL: the completion offers $w, which cuslice --help does not document"
		fail=1
	fi
done

if command -v zsh >/dev/null 2>&1; then
	zsh -n "$root/contrib/completion/_cuslice" || { echo "FAIL: zsh -n _cuslice"; fail=1; }
else
	echo "zsh not installed: _cuslice not parsed"
fi
[[ $fail == 0 ]] && echo "completion: all checks passed"
exit $fail
