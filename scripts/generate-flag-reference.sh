#!/usr/bin/env bash
# Rewrites the flag reference in docs/operations.md from the text `spillway --help` prints.
# server/src/flag-reference.test.ts fails while the committed section differs from it.
set -euo pipefail
cd "$(dirname "$0")/.."
npx tsc -b tsconfig.build.json tsconfig.harness.json
node --input-type=module -e '
const { writeFlagReference } = await import(process.argv[1]);
await writeFlagReference("docs/operations.md");
' "$PWD/dist/server/src/flag-reference.js"
