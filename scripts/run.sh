#!/usr/bin/env bash
# README command one: installs what is missing, builds, then runs the main job: the default
# synthetic Llama (~100M parameters, bf16; written to .brigade/ on first run) serving several
# concurrent prompts through the actor topology, printing their text and tokens/s.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
TARGETS=brigade bash scripts/build.sh
exec build/tools/brigade demo "$@"
