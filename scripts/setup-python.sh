#!/usr/bin/env bash
# setup-python.sh prepares .venv-python (created once, git-ignored) with the Python SDK, its test
# tools and the pinned pydantic-ai-harness it adapts to; the tests and the benchmark use it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=".venv-python"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -e "clients/python[test,harness]"
