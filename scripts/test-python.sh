#!/usr/bin/env bash
# test-python.sh checks the Python SDK (clients/python) with ruff and mypy, then runs its pytest
# suite against a real server the tests start themselves, in the virtualenv setup-python.sh
# prepares; the retry tests put a real nginx (install-nginx.sh) in front of it. Then it runs the pydantic-ai tests again at the other
# ends of the extras' version ranges: the oldest supported pydantic-ai-harness and
# pydantic-ai-slim, and the newest pydantic-ai-slim (see setup-python.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh
bash scripts/setup-python.sh oldest
bash scripts/setup-python.sh newest
bash scripts/install-nginx.sh
cd clients/python
# Lint and types first (pyproject.toml's [tool.ruff] and [tool.mypy]; generated code excluded).
../../.venv-python/bin/python -m ruff check .
../../.venv-python/bin/python -m ruff format --check .
../../.venv-python/bin/python -m mypy src
# pytest exits 5 when it collected no tests; that is a failure here like any other non-zero code.
../../.venv-python/bin/python -m pytest -q -p no:cacheprovider
echo "oldest: $(../../.venv-python-oldest/bin/pip list 2>/dev/null | grep -E '^pydantic-ai-(harness|slim) ' | tr -s ' ' | paste -sd, -)"
../../.venv-python-oldest/bin/python -m pytest -q -p no:cacheprovider tests/test_pydantic_ai.py \
  tests/test_harness.py tests/test_harness_windows.py tests/test_docs_examples.py tests/test_elision_policy.py
echo "newest: $(../../.venv-python-newest/bin/pip list 2>/dev/null | grep -E '^pydantic-ai-slim ' | tr -s ' ')"
exec ../../.venv-python-newest/bin/python -m pytest -q -p no:cacheprovider tests/test_pydantic_ai.py \
  tests/test_elision_policy.py "tests/test_docs_examples.py::test_pydantic_ai_example_shows_the_servers_preview" \
  "tests/test_docs_examples.py::test_elision_policy_example_shows_the_summary_with_the_handle"
