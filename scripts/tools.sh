#!/usr/bin/env bash
# Makes sure the tools the deploy kit's checks run are installed; idempotent.
# Usage: scripts/tools.sh [prometheus] [jsonschema] [kubernetes] [valgrind]
#        (no argument: the first three, which the tests need)
#
# prometheus: Debian's `prometheus` package (promtool and the server the dashboard test starts;
#             its service is never started here).
# jsonschema: `check-jsonschema` (vendors the compose specification's schema) and
# kubernetes: `kubernetes-validate` (the core objects' schemas), both from PyPI into the test
#             virtual environment (docs/TEST-SERVERS.md).
# valgrind:   Debian's `valgrind` (callgrind and callgrind_control) and `strace`, for
#             `make bench`'s instruction and system call counts only.
# A tool that cannot be installed fails the script loudly: the checks never pass without it.
set -euo pipefail

VENV=${FETCHER_TEST_VENV:-/opt/fetcher-test-venv}

log() { printf 'tools: %s\n' "$*" >&2; }

apt_install() {
  log "installing $*"
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq >&2; APT_UPDATED=1; fi
  # policy-rc.d 101: the package's service is not started by its installation.
  local policy=/usr/sbin/policy-rc.d created=
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; created=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 || {
    [ -n "$created" ] && rm -f "$policy"; return 1; }
  [ -n "$created" ] && rm -f "$policy"
  return 0
}

venv() {
  [ -x "$VENV/bin/pip" ] && return 0
  command -v python3 >/dev/null || apt_install python3 python3-venv
  log "creating $VENV"
  python3 -m venv "$VENV"
}

pip_install() {
  venv
  log "installing $* from PyPI"
  "$VENV/bin/pip" install -q "$@" >&2
}

ensure_prometheus() {
  if command -v promtool >/dev/null && command -v prometheus >/dev/null; then return 0; fi
  apt_install prometheus
  command -v promtool >/dev/null || { log "promtool missing after installing prometheus"; return 1; }
}

ensure_jsonschema() {
  [ -x "$VENV/bin/check-jsonschema" ] && return 0
  pip_install 'check-jsonschema==0.39.0'
}

ensure_valgrind() {
  command -v valgrind >/dev/null && command -v callgrind_control >/dev/null \
    && command -v strace >/dev/null && return 0
  apt_install valgrind strace
}

ensure_kubernetes() {
  [ -x "$VENV/bin/kubernetes-validate" ] && return 0
  pip_install 'kubernetes-validate==1.37.0'
}

main() {
  local tools=("$@")
  [ ${#tools[@]} -eq 0 ] && tools=(prometheus jsonschema kubernetes)
  for tool in "${tools[@]}"; do
    case "$tool" in
      prometheus) ensure_prometheus ;;
      jsonschema) ensure_jsonschema ;;
      kubernetes) ensure_kubernetes ;;
      valgrind) ensure_valgrind ;;
      *) log "unknown tool: $tool"; exit 2 ;;
    esac
  done
}

main "$@"
