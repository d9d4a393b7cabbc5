#!/usr/bin/env bash
# install-connectconformance.sh installs connectrpc's conformance runner, connectconformance,
# built from source through the Go module proxy and cached outside the repo (like MinIO in
# scripts/install-object-servers.sh). Idempotent and quick when the pinned version is present.
set -euo pipefail

version="v1.0.7"
bin="${SPILLWAY_CACHE:-$HOME/.cache/spillway}/bin"
# shellcheck source=../../../scripts/go-install-pinned.sh
source "$(dirname "$0")/../../../scripts/go-install-pinned.sh"

go_install_pinned "$bin" connectconformance connectrpc.com/conformance/cmd/connectconformance \
  "$version" --version
echo "install-connectconformance: $bin/connectconformance" >&2
