#!/usr/bin/env bash
# ThreadSanitizer run of the whole test suite, against a TSan-instrumented CAF.
#
# Debian's libcaf_core/libcaf_io are not built with -fsanitize=thread, so TSan cannot see the
# synchronisation inside CAF's mailboxes and reports a false race on every message. This script
#   1. builds CAF (core + io only) from Debian's source package with -fsanitize=thread into
#      .brigade/caf-tsan/ (ignored by git), only when that cache is absent;
#   2. configures and builds brigade into ${BUILD_DIR:-build-tsan} (RelWithDebInfo,
#      -DBRIGADE_SANITIZE=thread, no benchmarks) against that CAF: its headers (with the
#      generated caf/detail/build_config.hpp) come first, its libraries are in the RPATH, and
#      the script checks both before running anything;
#   3. runs ctest with TSAN_OPTIONS (halt_on_error=0, second_deadlock_stack=1,
#      suppressions=scripts/tsan.supp). A TSan report makes its test exit non-zero, so a green
#      ctest means every test passed and no unsuppressed report was printed.
# Extra arguments go to ctest (e.g. -R Scheduler). JOBS overrides the parallelism; TARGETS
# builds only those targets; the tests of the others then fail as not built, so exclude them, e.g.
#   TARGETS="actors_test messages_test brigade" bash scripts/tsan.sh -E 'NOT_BUILT|^example_'
# The CUDA backend is off (no device code runs under TSan here).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
caf_version=0.17.6
cache=$root/.brigade/caf-tsan
stamp=$cache/.complete-$caf_version
build_dir=${BUILD_DIR:-build-tsan}
jobs=${JOBS:-$(nproc)}
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

log() { echo "tsan.sh: $*"; }

# Fetches and unpacks Debian's actor-framework source into $1, printing the source folder.
fetch_caf_source() {
  local dest=$1
  if ! command -v dpkg-source >/dev/null; then
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq --no-install-recommends dpkg-dev >&2
  fi
  if ! apt-cache showsrc actor-framework 2>/dev/null | grep -q "^Version: $caf_version"; then
    log "no deb-src entry knows actor-framework $caf_version: adding one" >&2
    $SUDO tee /etc/apt/sources.list.d/debian-src.sources >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    $SUDO apt-get update -qq >&2
  fi
  mkdir -p "$dest"
  if (cd "$dest" && apt-get source -qq actor-framework >&2) &&
     [ -d "$dest/actor-framework-$caf_version" ]; then
    ls -d "$dest"/actor-framework-$caf_version
    return
  fi
  # apt-get source fetches the .dsc and the upstream tarball first; when only the small Debian
  # tarball (packaging and patches) cannot be fetched, unpack the upstream tarball after checking
  # it against the .dsc (whose hash apt checked), and apply the one difference between upstream's
  # headers and those of Debian's libcaf-dev (a missing <limits> include, needed by GCC >= 11).
  local dsc orig
  dsc=$(ls "$dest"/actor-framework_"$caf_version"-*.dsc 2>/dev/null | head -1 || true)
  orig=$dest/actor-framework_$caf_version.orig.tar.gz
  [ -n "$dsc" ] && [ -f "$orig" ] || { log "apt-get source actor-framework failed" >&2; exit 1; }
  log "Debian tarball unavailable: unpacking the checked upstream tarball" >&2
  local want
  want=$(awk '/^Checksums-Sha256:/{f=1;next} /^[^ ]/{f=0} f && $3 ~ /orig\.tar\.gz$/ {print $1}' "$dsc")
  echo "$want  $orig" | sha256sum -c --quiet - >&2
  tar -C "$dest" -xzf "$orig"
  local rb=$dest/actor-framework-$caf_version/libcaf_io/caf/io/network/receive_buffer.hpp
  grep -q '#include <limits>' "$rb" || sed -i 's|^#include <cstddef>|#include <cstddef>\n#include <limits>|' "$rb"
  grep -q '#include <limits>' "$rb"
  ls -d "$dest"/actor-framework-$caf_version
}

build_caf() {
  local t0=$SECONDS src
  log "building CAF $caf_version with -fsanitize=thread into $cache (once)"
  rm -rf "$cache"
  src=$(fetch_caf_source "$cache/src")
  local launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S "$src" -B "$cache/build" -G Ninja -Wno-dev "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX="$cache" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
    -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_TOOLS=yes -DCAF_NO_OPENSSL=yes \
    -DCAF_NO_PYTHON=yes -DCAF_NO_OPENCL=yes -DCAF_NO_SUMMARY=yes >/dev/null
  cmake --build "$cache/build" -j "$jobs"
  cmake --install "$cache/build" >/dev/null
  rm -rf "$cache/build"
  nm -D "$cache/lib/libcaf_core.so" | grep -q __tsan_func_entry ||
    { log "libcaf_core.so is not instrumented"; exit 1; }
  touch "$stamp"
  log "CAF built in $((SECONDS - t0)) s"
}

[ -f "$stamp" ] || build_caf

# ---- brigade -------------------------------------------------------------------------------
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRIGADE_SANITIZE=thread -DBRIGADE_BENCH=OFF -DBRIGADE_CUDA=OFF \
  -DCAF_INCLUDE_DIR="$cache/include" \
  -DCAF_CORE_LIBRARY="$cache/lib/libcaf_core.so" -DCAF_IO_LIBRARY="$cache/lib/libcaf_io.so" \
  -DCMAKE_BUILD_RPATH="$cache/lib"
if [ -n "${TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build_dir" -j "$jobs" --target $TARGETS
else
  cmake --build "$build_dir" -j "$jobs"
fi

# Every object must have read CAF's headers from the cache, never /usr/include/caf.
if ninja -C "$build_dir" -t deps | grep -q '^ */usr/include/caf/'; then
  log "some objects include /usr/include/caf instead of $cache/include"; exit 1
fi
# Every test binary that links CAF must load the instrumented one.
export LD_LIBRARY_PATH="$cache/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
while IFS= read -r exe; do
  if ldd "$exe" | grep -E 'libcaf_(core|io)' | grep -vq "$cache/lib"; then
    log "$exe loads a CAF outside $cache/lib:"; ldd "$exe" | grep libcaf; exit 1
  fi
done < <(find "$build_dir/tests" "$build_dir/tools" -type f -perm -u+x ! -name '*.so*' 2>/dev/null)

export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 suppressions=$root/scripts/tsan.supp${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
rc=0
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@" || rc=$?
log_file=$build_dir/Testing/Temporary/LastTest.log
if [ -f "$log_file" ]; then
  log "$(grep -c '^WARNING: ThreadSanitizer' "$log_file" || true) unsuppressed TSan reports in $log_file"
fi
exit $rc
