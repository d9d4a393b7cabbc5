#!/usr/bin/env bash
# install-connectconformance.sh installs connectrpc's conformance runner, connectconformance,
# built from source through the Go module proxy and cached outside the repo (like MinIO in
# scripts/install-object-servers.sh). Idempotent and quick when the pinned version is present.
set -euo pipefail

version="v1.0.7"
cache="${SPILLWAY_CACHE:-$HOME/.cache/spillway}"
bin="$cache/bin"
stamp="$bin/connectconformance.version"
mkdir -p "$bin"

fail() {
  echo "install-connectconformance: $*" >&2
  exit 1
}

if [[ -x "$bin/connectconformance" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
  exit 0
fi
command -v go >/dev/null || fail "Go is required to build connectconformance ${version} from source"
echo "install-connectconformance: building connectconformance ${version} into $bin" >&2
log="$cache/connectconformance-build.log"
if ! GOBIN="$bin" go install "connectrpc.com/conformance/cmd/connectconformance@${version}" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "building connectconformance ${version} failed; full log: $log"
fi
[[ -x "$bin/connectconformance" ]] || fail "go install succeeded but $bin/connectconformance is missing"
"$bin/connectconformance" --version | grep -qF "$version" ||
  fail "$bin/connectconformance does not report version ${version}"
echo "$version" >"$stamp"
echo "install-connectconformance: $bin/connectconformance" >&2
