#!/usr/bin/env bash
# README command one: installs what is missing, builds, then runs the main job (`brigade demo`):
# the OpenAI-compatible server on the default synthetic Llama (~100M parameters, bf16; written to
# .brigade/ on first run), one chat completion, a short load of concurrent streaming clients, and
# the summary table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
TARGETS=brigade bash scripts/build.sh
exec build/tools/brigade demo "$@"
