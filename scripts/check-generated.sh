#!/usr/bin/env bash
# check-generated.sh fails when the committed generated code differs from a fresh generation.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/generate.sh
bash scripts/generate-python.sh
bash scripts/generate-go.sh
bash conformance/connectrpc/scripts/generate.sh
generated=(proto/gen clients/python/src/spillway_client/_gen clients/go/gen conformance/connectrpc/gen)
if ! git diff --exit-code --stat -- "${generated[@]}"; then
  echo "check-generated: generated code is stale; run npm run generate (and bash scripts/generate-python.sh, bash scripts/generate-go.sh, bash conformance/connectrpc/scripts/generate.sh) and commit" >&2
  exit 1
fi
untracked="$(git ls-files --others --exclude-standard -- "${generated[@]}")"
if [[ -n "$untracked" ]]; then
  echo "check-generated: untracked generated files: $untracked" >&2
  exit 1
fi
