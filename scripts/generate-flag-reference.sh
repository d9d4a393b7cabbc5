#!/usr/bin/env bash
# Rewrites the flag reference in docs/operations.md from the text `spillway --help` prints.
# server/src/flag-reference.test.ts fails while the committed section differs from it.
set -euo pipefail
cd "$(dirname "$0")/.."
npm run build >/dev/null
node --input-type=module -e '
const { writeFlagReference } = await import(process.argv[1]);
await writeFlagReference("docs/operations.md");
' "$PWD/server/dist/flag-reference.js"
