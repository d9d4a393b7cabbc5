#!/usr/bin/env bash
# install-nginx.sh installs nginx from the distribution (Debian/Ubuntu apt) for the load-balancer
# test, which runs replicas behind a real nginx. Idempotent: does nothing when nginx is on PATH,
# and refreshes the package index only when the install needs it.
set -euo pipefail

fail() {
  echo "install-nginx: $*" >&2
  exit 1
}

# Debian installs nginx in /usr/sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"
if command -v nginx >/dev/null; then
  echo "install-nginx: nginx=$(command -v nginx)"
  exit 0
fi

command -v apt-get >/dev/null || fail "nginx is not installed and apt-get is unavailable; install nginx (1.22+) yourself"
sudo=()
if [[ "$(id -u)" != "0" ]]; then
  command -v sudo >/dev/null || fail "installing nginx needs root (or sudo)"
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends nginx-light >/dev/null 2>&1; then
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends nginx-light >/dev/null ||
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends nginx >/dev/null ||
    fail "apt-get install nginx-light (or nginx) failed"
fi
command -v nginx >/dev/null || fail "nginx is not on PATH after installing it"
echo "install-nginx: nginx=$(command -v nginx)"
