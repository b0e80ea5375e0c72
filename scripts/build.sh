#!/usr/bin/env bash
# Configures and builds brigade into ${BUILD_DIR:-build} (Release, Ninja, ccache when present).
# Extra arguments go to cmake's configure step, e.g. -DBRIGADE_SANITIZE=address.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
cmake --build "$build_dir" -j "$jobs" ${TARGETS:+--target $TARGETS}
