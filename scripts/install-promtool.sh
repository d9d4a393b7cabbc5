#!/usr/bin/env bash
# install-promtool.sh builds Prometheus' promtool (pinned) from source through the Go module
# proxy into Spillway's cache outside the repo, so test/alert-rules.test.ts can check the
# shipped alert rules (docs/alerts/spillway.rules.yml) with the same parser Prometheus uses.
# Prints the binary's path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=go-install-pinned.sh
source "$here/go-install-pinned.sh"
bin="${SPILLWAY_CACHE:-$HOME/.cache/spillway}/bin"
# Prometheus' Go module v0.316.0 is Prometheus 3.16.0.
promtool_version="v0.316.0"
go_install_pinned "$bin" promtool github.com/prometheus/prometheus/cmd/promtool "$promtool_version"
echo "$bin/promtool"
