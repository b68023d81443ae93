#!/bin/sh
# Installs the Debian packages the build and the tests need. Idempotent: silent
# and fast (one dpkg-query) when everything is present.
set -eu

PKGS="meson ninja-build pkg-config python3 gcc clang libcmocka-dev libcjson-dev libmicrohttpd-dev libinih-dev libsmartcols-dev libcurl4-openssl-dev prometheus
	slurmd slurmctld slurm-client libslurm-dev munge"

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
# Installing munge and Slurm (for the Slurm plugin's tests, which start their
# own private cluster) must not start the packages' system services: a
# policy-rc.d that refuses every start is in place for the install only.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# deps.sh: no service starts while packages install\nexit 101\n' |
		$SUDO tee "$policy" >/dev/null
	$SUDO chmod 755 "$policy"
	own_policy=1
fi
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null || rc=$?
[ -n "$own_policy" ] && $SUDO rm -f "$policy"
exit "${rc:-0}"
