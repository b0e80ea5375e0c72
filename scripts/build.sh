#!/usr/bin/env bash
# Configures and builds brigade into ${BUILD_DIR:-build} (Release, Ninja, ccache when present).
# Extra arguments go to cmake's configure step, e.g. -DBRIGADE_SANITIZE=address.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so clones at other paths (CI's, worktrees) share hits.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
cmake --build "$build_dir" -j "$jobs" ${TARGETS:+--target $TARGETS}
