#!/usr/bin/env bash
# Installs every Debian package that brigade's build, tests and benchmarks need.
# Idempotent: packages already present are skipped, and apt is not touched when nothing is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git python3 python3-venv
  libcaf-dev capnproto libcapnp-dev librocksdb-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libyaml-cpp-dev nlohmann-json3-dev
  libcli11-dev libpcre2-dev libsentencepiece-dev libboost-dev libboost-system-dev
  libopenblas-dev libxxhash-dev libssl-dev libpng-dev libjpeg-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
