#!/usr/bin/env bash
# generate.sh regenerates conformance/connectrpc/gen from connectrpc's conformance protos. They
# come from the Go module proxy (the conformance runner's own module, the same version the
# runner is built from), because the Buf Schema Registry is not reachable where Spillway is built.
set -euo pipefail
cd "$(dirname "$0")/../../.."
version="v1.0.7"
dest=".deps/connectconformance"
if [[ ! -f "$dest/VERSION" || "$(cat "$dest/VERSION")" != "$version" ]]; then
  dir="$(GOFLAGS=-mod=mod go mod download -json "connectrpc.com/conformance@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  if [[ -z "$dir" ]]; then
    echo "connectrpc/generate: go mod download gave no directory" >&2
    exit 1
  fi
  rm -rf "$dest"
  mkdir -p "$dest/proto"
  cp -R "$dir/proto/connectrpc" "$dest/proto/"
  chmod -R u+w "$dest"
  printf 'version: v2\n' >"$dest/proto/buf.yaml"
  echo "$version" >"$dest/VERSION"
fi
PATH="$PWD/node_modules/.bin:$PATH" buf generate "$dest/proto" \
  --template conformance/connectrpc/buf.gen.yaml
