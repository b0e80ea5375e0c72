#!/usr/bin/env bash
# README command two: installs what is missing, builds, and runs the whole test suite.
# Tests that need ../shared/testdata skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh -DBRIGADE_WERROR=ON "$@"
build_dir=${BUILD_DIR:-build}
# The openai client tests' venv (.brigade/venv); without python3-venv or network they skip.
bash scripts/python-env.sh setup || echo "test.sh: no Python venv: the openai_client test will be skipped"
ctest --test-dir "$build_dir" --output-on-failure -j "${JOBS:-$(nproc)}"
