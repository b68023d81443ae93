# Sourced by the injection tests: a private /etc for node-wide modes
# (/etc/ld.so.preload, ld.so.conf) without touching the node's own.
#
# private_etc TMP NAME...: makes TMP/etc, a farm of links to every entry of
#   the real /etc (seen through TMP/orig once mounted) but the NAMEs, which
#   the caller writes itself.
# in_private_etc TMP CMD...: runs CMD with TMP/etc as /etc, in a mount
#   namespace of its own (root only); the mounts vanish with it.
private_etc() {
	pe_tmp=$1
	shift
	mkdir "$pe_tmp/etc" "$pe_tmp/orig"
	for pe_f in /etc/* /etc/.[!.]*; do
		[ -e "$pe_f" ] || [ -L "$pe_f" ] || continue
		pe_name=${pe_f#/etc/}
		for pe_skip in "$@"; do
			[ "$pe_name" != "$pe_skip" ] || continue 2
		done
		ln -s "$pe_tmp/orig/$pe_name" "$pe_tmp/etc/$pe_name"
	done
}

in_private_etc() {
	pe_tmp=$1
	shift
	# shellcheck disable=SC2016 # expanded by the namespace's shell
	unshare --mount --propagation private sh -c '
		mount --bind /etc "$1/orig" && mount --bind "$1/etc" /etc || exit 99
		shift; exec "$@"' sh "$pe_tmp" "$@"
}
