#!/usr/bin/env bash
# test-python.sh runs the Python SDK's pytest suite (clients/python) against a real server the
# tests start themselves, in the virtualenv setup-python.sh prepares; the retry tests put a real
# nginx (install-nginx.sh) in front of it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh
bash scripts/install-nginx.sh
# pytest exits 5 when it collected no tests; that is a failure here like any other non-zero code.
cd clients/python
exec ../../.venv-python/bin/python -m pytest -q -p no:cacheprovider
