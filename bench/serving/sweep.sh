#!/usr/bin/env bash
# Serving benchmark (issue #4): the default model behind `brigade serve`, driven by
# `brigade bench` with 1, 8, 32 and 64 concurrent streaming clients; then, at 32 clients, without
# chunked prefill and with one step in flight instead of two. Prompts of 64-192 tokens, 64 output
# tokens (INPUT_LEN, INPUT_LEN_MAX, OUTPUT_LEN override), greedy, prefix cache off (distinct random prompts would not hit it anyway; off keeps the
# comparison about scheduling). Writes JSON per run under $OUT_DIR and prints one table.
#   bash bench/serving/sweep.sh            (needs a built build/tools/brigade)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/serving/common.sh
OUT_DIR=${OUT_DIR:-.brigade/bench-serving}
PORT=${PORT:-8311}
INPUT_LEN=${INPUT_LEN:-64} INPUT_LEN_MAX=${INPUT_LEN_MAX:-192}
OUTPUT_LEN=${OUTPUT_LEN:-64}
MIN_REQUESTS=${MIN_REQUESTS:-16}
mkdir -p "$OUT_DIR"
MODEL=${MODEL:-.brigade/models/default-llama-100m}  # the default model; `brigade demo` writes it
if [ ! -f "$MODEL/model.safetensors" ]; then "$BRIGADE" demo --requests 1 --concurrency 1 >/dev/null; fi

run() {  # name clients scheduler-yaml
  local name=$1 clients=$2 sched=$3
  local requests=$((clients * 2)); [ "$requests" -lt "$MIN_REQUESTS" ] && requests=$MIN_REQUESTS
  topology "$OUT_DIR/$name.yaml" "$sched" "radix: false"
  start_server "$MODEL" "$OUT_DIR/$name.yaml" "$PORT" "$OUT_DIR/$name.log"
  "$BRIGADE" bench --port "$PORT" --requests "$requests" --concurrency "$clients" --input-len "$INPUT_LEN" --input-len-max "$INPUT_LEN_MAX" \
    --output-len "$OUTPUT_LEN" --seed 1 --json "$OUT_DIR/$name.json" >"$OUT_DIR/$name.txt"
  stop_server
}

for c in 1 8 32 64; do run "c$c" "$c" "max_running: 64"; done
run "c32-nochunk" 32 "max_running: 64, chunked_prefill: false"
run "c32-depth1" 32 "max_running: 64, max_inflight_steps: 1"

python3 - "$OUT_DIR" <<'PY'
import json, sys, os
d = sys.argv[1]
rows = ["c1", "c8", "c32", "c64", "c32-nochunk", "c32-depth1"]
base = json.load(open(os.path.join(d, "c1.json")))["output_tokens_per_s"]
print(f"{'run':<12} {'clients':>7} {'out tok/s':>9} {'x c1':>5} {'TTFT p50':>9} {'p90':>7} {'p99':>7} {'TPOT p50':>9} {'p90':>7} {'p99':>7} {'errors':>6}")
for r in rows:
    j = json.load(open(os.path.join(d, r + ".json")))
    t, p = j["ttft_s"], j["tpot_s"]
    print(f"{r:<12} {j['concurrency']:>7} {j['output_tokens_per_s']:>9.1f} {j['output_tokens_per_s']/base:>5.2f} "
          f"{t['p50']*1e3:>7.0f}ms {t['p90']*1e3:>5.0f}ms {t['p99']*1e3:>5.0f}ms "
          f"{p['p50']*1e3:>7.1f}ms {p['p90']*1e3:>5.1f}ms {p['p99']*1e3:>5.1f}ms {j['errors']:>6}")
PY
