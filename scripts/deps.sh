#!/bin/sh
# Installs the Debian packages the build and the tests need. Idempotent: silent
# and fast (one dpkg-query) when everything is present.
#
# usage: deps.sh [compat]
# With "compat", also the third-party programs of the compatibility suite
# (make compat, tests/compat: docs/compat.md).
set -eu

PKGS="meson ninja-build pkg-config python3 gcc clang libcmocka-dev libcjson-dev libmicrohttpd-dev libinih-dev libsmartcols-dev libcurl4-openssl-dev prometheus libgl-dev libegl-dev libvdpau-dev"
COMPAT_PKGS="python3-numba ffmpeg hashcat"
if [ "${1:-}" = compat ]; then
	PKGS="$PKGS $COMPAT_PKGS"
fi

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
