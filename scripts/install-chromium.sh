#!/usr/bin/env bash
# install-chromium.sh installs Chromium from the distribution (Debian's `chromium`, Ubuntu's
# `chromium-browser`) for test/inspector.test.ts, which drives the browser inspector in a real
# browser through puppeteer-core. Idempotent: does nothing when a Chromium is on PATH (or named
# by SPILLWAY_CHROMIUM), and refreshes the package index only when the install needs it.
set -euo pipefail

fail() {
  echo "install-chromium: $*" >&2
  exit 1
}

find_chromium() {
  if [[ -n "${SPILLWAY_CHROMIUM:-}" && -x "${SPILLWAY_CHROMIUM}" ]]; then
    echo "${SPILLWAY_CHROMIUM}"
    return 0
  fi
  local name
  for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

if found=$(find_chromium); then
  echo "install-chromium: chromium=$found"
  exit 0
fi

# shellcheck source=apt-install.sh
source "$(dirname "$0")/apt-install.sh"
apt_install_one_of install-chromium chromium chromium-browser ||
  fail "install Chromium yourself or set SPILLWAY_CHROMIUM"
found=$(find_chromium) || fail "Chromium is not on PATH after installing it"
echo "install-chromium: chromium=$found"
