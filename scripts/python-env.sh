#!/usr/bin/env bash
# The Python environment for the client tests: .brigade/venv (git-ignored) with `openai` and
# `pytest` from PyPI, `jsonschema` (the reference validator of the schema tests) and
# `prometheus_client` (the reference parser of /metrics).
#
#   scripts/python-env.sh setup              # create/refresh the venv (idempotent, quiet)
#   scripts/python-env.sh run-pytest ARGS... # setup, then run pytest; exit 77 (ctest: skipped)
#                                            # when python3-venv or pip cannot provide the venv
#
# pytest's exit code 5 ("no tests collected") is turned into a failure: a suite that silently
# finds nothing must not pass.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${BRIGADE_VENV:-$root/.brigade/venv}
packages=(openai pytest jsonschema prometheus_client)

setup() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import openai, pytest, jsonschema, prometheus_client" 2>/dev/null; then
    return 0
  fi
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    echo "python-env: cannot create $venv (install python3-venv: scripts/install-deps.sh)" >&2
    rm -rf "$venv"
    return 77
  fi
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check "${packages[@]}"; then
    echo "python-env: pip could not install ${packages[*]} into $venv (offline?)" >&2
    return 77
  fi
}

case "${1:-}" in
  setup)
    setup
    ;;
  run-pytest)
    shift
    setup || exit $?
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
    rc=$?
    if [ "$rc" -eq 5 ]; then
      echo "python-env: pytest collected no tests: treating as a failure" >&2
      exit 1
    fi
    exit "$rc"
    ;;
  *)
    echo "usage: $0 setup | run-pytest [pytest args...]" >&2
    exit 2
    ;;
esac
