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
bin="${SPILLWAY_CACHE:-$HOME/.cache/spillway}/bin"
# shellcheck source=go-install-pinned.sh
source scripts/go-install-pinned.sh
GOFLAGS=-mod=mod go_install_pinned "$bin" protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go \
  "$protoc_gen_go_version"
GOFLAGS=-mod=mod go_install_pinned "$bin" protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc \
  "$protoc_gen_go_grpc_version"

bash scripts/fetch-protovalidate.sh
PATH="$bin:$PWD/node_modules/.bin:$PATH" buf generate --template clients/go/buf.gen.yaml
