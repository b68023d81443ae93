#!/bin/sh
# make deb: cuslice's Debian packages (debian/), built with debhelper from a
# copy of the working tree (tracked and untracked files git does not
# ignore) in OUT/cuslice-VERSION, so that the build's byproducts
# (debian/tmp, obj-*) never land in the checkout; the .deb files land in
# OUT (default build-deb).
#
# usage: scripts/make-deb.sh [OUT]
# Environment: CUSLICE_MESON_OPTS (more meson options, e.g. -Dtoolkit=DIR);
# CUSLICE_DEB_VERSION (a version of the packages other than debian/changelog's,
# given its own changelog entry in the copy: the package test's upgrade).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$repo/build-deb}" && cd "${1:-$repo/build-deb}" && pwd)
version=${CUSLICE_DEB_VERSION:-$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)}
src=$out/cuslice-$version

rm -rf "$src" "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
mkdir -p "$src"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
	xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
	tar --null -T - -cf -) | tar -C "$src" -xf -
cd "$src"
if [ "$version" != "$(dpkg-parsechangelog -S Version)" ]; then
	{
		printf 'cuslice (%s) bookworm; urgency=medium\n\n  * Built as %s (CUSLICE_DEB_VERSION).\n\n' \
			"$version" "$version"
		printf ' -- cuslice maintainers <maintainers@cuslice.invalid>  %s\n\n' "$(date -R)"
		cat debian/changelog
	} >debian/changelog.new
	mv debian/changelog.new debian/changelog
fi
# -b: binary packages only; -us -uc: unsigned (a local build).
dpkg-buildpackage -b -us -uc -j"$(nproc)" >"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log" >&2
	echo "make deb: dpkg-buildpackage failed; the whole log is $out/build.log" >&2
	exit 1
}
rm -rf "$src"
ls -1 "$out"/*.deb
