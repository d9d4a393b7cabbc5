#!/usr/bin/env bash
# fetch-protovalidate.sh places protovalidate's proto definitions in .deps/protovalidate.
# They come from the Go module proxy (the project's source distribution), pinned below,
# because the Buf Schema Registry is not reachable where Spillway is built.
set -euo pipefail
cd "$(dirname "$0")/.."
version="v1.2.2"
dest=".deps/protovalidate"
if [[ -f "$dest/VERSION" && "$(cat "$dest/VERSION")" == "$version" ]]; then
  exit 0
fi
dir="$(GOFLAGS=-mod=mod go mod download -json "github.com/bufbuild/protovalidate@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "$dir" ]]; then
  echo "fetch-protovalidate: go mod download gave no directory" >&2
  exit 1
fi
rm -rf "$dest"
mkdir -p "$dest/proto/protovalidate/buf/validate"
cp "$dir/proto/protovalidate/buf/validate/validate.proto" "$dest/proto/protovalidate/buf/validate/"
chmod -R u+w "$dest"
echo "$version" >"$dest/VERSION"
