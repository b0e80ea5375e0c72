#!/usr/bin/env bash
# README command two: installs what is missing, builds, and runs the whole test suite.
# Tests that need ../shared/testdata skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh -DBRIGADE_WERROR=ON "$@"
build_dir=${BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "${JOBS:-$(nproc)}"
