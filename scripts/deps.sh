#!/bin/sh
# Installs the Debian packages the build and the tests need, and the npm
# packages of the Kubernetes tests (tests/k8s/js, from its committed
# lockfile). Idempotent: silent and fast (one dpkg-query, one stat) when
# everything is present.
set -eu

PKGS="meson ninja-build pkg-config python3 gcc clang libcmocka-dev libcjson-dev libmicrohttpd-dev libinih-dev libsmartcols-dev libcurl4-openssl-dev prometheus"
# The Kubernetes plugins (src/k8s): gRPC C-core, protobuf-c; openssl makes the tests' CA.
PKGS="$PKGS libgrpc-dev libprotobuf-c-dev protobuf-c-compiler openssl"
# node runs the fake kubelet and API server of the Kubernetes tests (any node >= 18;
# Debian's is used only when none is installed).
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
if [ -n "$missing" ]; then
	echo "deps: installing$missing" >&2
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# npm: the Kubernetes tests' packages, exactly as locked. Reinstalled when the
# lockfile is newer than what npm ci left.
js="$(dirname "$0")/../tests/k8s/js"
if [ ! -f "$js/node_modules/.package-lock.json" ] || [ "$js/package-lock.json" -nt "$js/node_modules/.package-lock.json" ]; then
	echo "deps: npm ci in tests/k8s/js" >&2
	(cd "$js" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
