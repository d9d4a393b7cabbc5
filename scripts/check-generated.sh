#!/usr/bin/env bash
# check-generated.sh fails when the committed generated code differs from a fresh generation.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/generate.sh
if ! git diff --exit-code --stat -- clients/ts/src/gen; then
  echo "check-generated: generated code is stale; run npm run generate and commit" >&2
  exit 1
fi
untracked="$(git ls-files --others --exclude-standard -- clients/ts/src/gen)"
if [[ -n "$untracked" ]]; then
  echo "check-generated: untracked generated files: $untracked" >&2
  exit 1
fi
