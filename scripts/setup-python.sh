#!/usr/bin/env bash
# setup-python.sh prepares a virtualenv (created once, git-ignored) with the Python SDK and its
# test tools, at one end of the version ranges its pydantic-ai extras declare:
#   setup-python.sh           .venv-python: both extras and the `lint` tools, the `harness` one at its newest release
#                             (pydantic-ai-harness 0.62.0, which pins pydantic-ai-slim 2.62.0);
#                             the tests and the benchmark use it.
#   setup-python.sh oldest    .venv-python-oldest: both extras at their oldest supported releases
#                             (pydantic-ai-harness 0.60.0 with pydantic-ai-slim 2.60.0).
#   setup-python.sh newest    .venv-python-newest: the `pydantic-ai` extra at the newest
#                             pydantic-ai-slim (2.68.0), which no harness release allows.
# The ends are pinned here so a run is repeatable; move them with the ranges in pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") venv=".venv-python" spec="clients/python[test,lint,harness,pydantic-ai]" pins=("pydantic-ai-harness==0.62.0") ;;
  oldest)
    venv=".venv-python-oldest" spec="clients/python[test,harness,pydantic-ai]"
    pins=("pydantic-ai-harness==0.60.0" "pydantic-ai-slim==2.60.0")
    ;;
  newest) venv=".venv-python-newest" spec="clients/python[test,pydantic-ai]" pins=("pydantic-ai-slim==2.68.0") ;;
  *) echo "usage: setup-python.sh [oldest|newest]" >&2; exit 2 ;;
esac
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -e "$spec" "${pins[@]}"
