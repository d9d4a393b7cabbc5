#!/usr/bin/env bash
# go-install-pinned.sh, sourced by the install and generate scripts, defines go_install_pinned:
# the one way a pinned Go tool is built from source through the Go module proxy into Spillway's
# cache outside the repo, and skipped when that version is already there.

# go_install_pinned <bin-dir> <name> <module> <version> [version-flag]
# Leaves <bin-dir>/<name> built from <module>@<version> with <bin-dir>/<name>.version saying so,
# or exits 1 naming what failed (the build's last lines; its full log sits beside <bin-dir>).
# With a version flag, the built tool must print <version> when run with it before the stamp
# is written, so a tool that is not what was pinned is rebuilt next time.
go_install_pinned() {
  local bin="$1" name="$2" module="$3" version="$4" version_flag="${5:-}"
  local stamp="$bin/$name.version" log="$bin/../$name-build.log" me="${0##*/}"
  me="${me%.sh}"
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
    return 0
  fi
  mkdir -p "$bin"
  if ! command -v go >/dev/null; then
    echo "$me: Go is required to build $name ${version} from source" >&2
    exit 1
  fi
  echo "$me: building $name ${version} into $bin" >&2
  if ! GOBIN="$bin" go install "${module}@${version}" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "$me: building $name ${version} failed; full log: $log" >&2
    exit 1
  fi
  if [[ ! -x "$bin/$name" ]]; then
    echo "$me: go install succeeded but $bin/$name is missing" >&2
    exit 1
  fi
  if [[ -n "$version_flag" ]] && ! "$bin/$name" "$version_flag" | grep -qF "$version"; then
    echo "$me: $bin/$name does not report version ${version}" >&2
    exit 1
  fi
  echo "$version" >"$stamp"
}
