#!/usr/bin/env bash
# install-grpcurl.sh installs grpcurl, which the reflection and README tests run against a real
# server, built from source through the Go module proxy and cached outside the repo (like MinIO
# in scripts/install-object-servers.sh). Idempotent and quick when the pinned version is present.
set -euo pipefail

version="v1.9.4"
bin="${SPILLWAY_CACHE:-$HOME/.cache/spillway}/bin"
# shellcheck source=go-install-pinned.sh
source "$(dirname "$0")/go-install-pinned.sh"

# grpcurl built by go install reports "dev build", so its version cannot be checked by running it.
go_install_pinned "$bin" grpcurl github.com/fullstorydev/grpcurl/cmd/grpcurl "$version"
echo "install-grpcurl: $bin/grpcurl" >&2
