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

# shellcheck source=apt-install.sh
source "$(dirname "$0")/apt-install.sh"
apt_install_one_of install-nginx nginx-light nginx || exit 1
command -v nginx >/dev/null || fail "nginx is not on PATH after installing it"
echo "install-nginx: nginx=$(command -v nginx)"
