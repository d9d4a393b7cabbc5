#!/usr/bin/env bash
# generate-go.sh regenerates the committed Go code in clients/go/gen from proto/ with buf and
# the local protoc-gen-go and protoc-gen-go-grpc plugins (pinned below), which it builds through
# the Go module proxy into the cache on first use. The Buf Schema Registry is not reachable where
# Spillway is built, so no remote plugin is used. buf/validate's Go code is not generated: it is
# the published module buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go that
# clients/go/go.mod requires.
set -euo pipefail
cd "$(dirname "$0")/.."
protoc_gen_go_version="v1.36.12"
protoc_gen_go_grpc_version="v1.6.2"
cache="${SPILLWAY_CACHE:-$HOME/.cache/spillway}"
bin="$cache/bin"
mkdir -p "$bin"

install_plugin() {
  local name="$1" module="$2" version="$3"
  if [[ -x "$bin/$name" && -f "$bin/$name.version" && "$(cat "$bin/$name.version")" == "$version" ]]; then
    return
  fi
  command -v go >/dev/null || { echo "generate-go: Go is required to build $name" >&2; exit 1; }
  GOBIN="$bin" GOFLAGS=-mod=mod go install "${module}@${version}"
  echo "$version" >"$bin/$name.version"
}
install_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$protoc_gen_go_version"
install_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$protoc_gen_go_grpc_version"

bash scripts/fetch-protovalidate.sh
PATH="$bin:$PWD/node_modules/.bin:$PATH" buf generate --template clients/go/buf.gen.yaml
