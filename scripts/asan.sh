#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the whole test suite.
#
#   1. configures and builds brigade into ${BUILD_DIR:-build-asan} (RelWithDebInfo,
#      -DBRIGADE_SANITIZE=address,undefined, no benchmarks, no CUDA); ccache keys on paths relative
#      to the checkout (CCACHE_BASEDIR, as in build.sh), so other checkouts share its hits;
#   2. runs ctest with
#      ASAN_OPTIONS  detect_leaks=1 and initialization-order checks; an ASan or LeakSanitizer
#                    report fails its test (no leak suppressions: none has been needed);
#      UBSAN_OPTIONS halt_on_error=1, print_stacktrace=1, suppressions=scripts/ubsan.supp.
#      CMakeLists.txt makes every UBSan check unrecoverable except `null`, which stays
#      recoverable only so that ubsan.supp can skip CAF's spawn site; halt_on_error=1 makes any
#      other null report abort. So a green ctest means every test passed with no unsuppressed
#      report. The same options are set while building, since gtest_discover_tests runs each
#      test binary (--gtest_list_tests) as a build step.
# CAF, RocksDB, OpenBLAS and libstdc++ are Debian's, not instrumented: ASan sees their heap through
# its malloc interceptors (so leaks and bad frees there are reported), not their internal accesses.
# Extra arguments go to ctest (e.g. -R Scheduler). JOBS overrides the parallelism; TARGETS builds
# only those targets; the tests of the others then fail as not built, so exclude them, e.g.
#   TARGETS=messages_test bash scripts/asan.sh -R '^(Envelope|Caf|Convert|Error|Blob|SharedBlob)'
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build_dir=${BUILD_DIR:-build-asan}
jobs=${JOBS:-$(nproc)}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}

log() { echo "asan.sh: $*"; }

export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$root/scripts/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRIGADE_SANITIZE=address,undefined \
  -DBRIGADE_BENCH=OFF -DBRIGADE_CUDA=OFF
if [ -n "${TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build_dir" -j "$jobs" --target $TARGETS
else
  cmake --build "$build_dir" -j "$jobs"
fi

rc=0
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@" || rc=$?
log_file=$build_dir/Testing/Temporary/LastTest.log
if [ -f "$log_file" ]; then
  n_asan=$(grep -c -E '^==[0-9]+==ERROR: (AddressSanitizer|LeakSanitizer)' "$log_file" || true)
  n_ubsan=$(grep -c 'runtime error:' "$log_file" || true)
  log "$n_asan ASan/LSan and $n_ubsan UBSan unsuppressed reports in $log_file"
fi
exit $rc
