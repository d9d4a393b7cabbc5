#!/usr/bin/env bash
# apt-install.sh, sourced by the installers of system packages the tests need (nginx, Chromium).
#
# apt_install_one_of <label> <package>...: installs the first of the packages apt-get can
# install, as root or through sudo. The package index is refreshed only when
# the first attempt fails, so a machine whose index is current installs without network to the
# mirrors' index. Says why on stderr, prefixed with <label>, and returns 1 when it cannot.
apt_install_one_of() {
  local label=$1
  shift
  if ! command -v apt-get >/dev/null; then
    echo "$label: $1 is not installed and apt-get is unavailable; install it yourself" >&2
    return 1
  fi
  local sudo=()
  if [[ "$(id -u)" != "0" ]]; then
    if ! command -v sudo >/dev/null; then
      echo "$label: installing $1 needs root (or sudo)" >&2
      return 1
    fi
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y -qq "$1" >/dev/null 2>&1 && return 0
  "${sudo[@]}" apt-get update -qq
  local package
  for package in "$@"; do
    "${sudo[@]}" apt-get install -y -qq "$package" >/dev/null && return 0
  done
  echo "$label: apt-get install $* failed" >&2
  return 1
}
