#!/usr/bin/env bash
# generate.sh regenerates the committed TypeScript under proto/gen from proto/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-protovalidate.sh
PATH="$PWD/node_modules/.bin:$PATH" buf generate
