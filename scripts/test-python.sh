#!/usr/bin/env bash
# test-python.sh runs the Python SDK's pytest suite (clients/python) against a real server the
# tests start themselves. The virtualenv lives in .venv-python (created once, git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=".venv-python"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -e "clients/python[test,harness]"
# pytest exits 5 when it collected no tests; that is a failure here like any other non-zero code.
cd clients/python
exec "../../$venv/bin/python" -m pytest -q -p no:cacheprovider
