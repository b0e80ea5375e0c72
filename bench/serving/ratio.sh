#!/usr/bin/env bash
# The issue-#4 target, measured robustly on a shared machine: throughput at 32 clients over the
# single-client throughput, with the c1 and c32 runs interleaved (c1, c32, c1, c32, ...) so that
# drift of the machine between runs (other tenants, clock) hits both sides of each ratio alike.
# Prints each pair's ratio and the median. Same workload knobs as sweep.sh (decode-heavy here by
# default: INPUT_LEN=16 INPUT_LEN_MAX=48 OUTPUT_LEN=128), default topology (2 steps in flight,
# chunked prefill), prefix cache off.
#   bash bench/serving/ratio.sh            (needs a built build/tools/brigade; PAIRS=3)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/serving/common.sh
OUT_DIR=${OUT_DIR:-.brigade/bench-ratio}
PORT=${PORT:-8312}
INPUT_LEN=${INPUT_LEN:-16} INPUT_LEN_MAX=${INPUT_LEN_MAX:-48} OUTPUT_LEN=${OUTPUT_LEN:-128}
PAIRS=${PAIRS:-3} CLIENTS=${CLIENTS:-32}
mkdir -p "$OUT_DIR"
MODEL=${MODEL:-.brigade/models/default-llama-100m}
if [ ! -f "$MODEL/model.safetensors" ]; then "$BRIGADE" demo --requests 1 --concurrency 1 >/dev/null; fi
topology "$OUT_DIR/topology.yaml" "max_running: 64" "radix: false"
start_server "$MODEL" "$OUT_DIR/topology.yaml" "$PORT" "$OUT_DIR/server.log"
trap stop_server EXIT
run() {  # name clients requests
  "$BRIGADE" bench --port "$PORT" --requests "$3" --concurrency "$2" --input-len "$INPUT_LEN" --input-len-max "$INPUT_LEN_MAX" \
    --output-len "$OUTPUT_LEN" --seed "$4" --json "$OUT_DIR/$1.json" >"$OUT_DIR/$1.txt"
}
run warmup 4 8 0
for i in $(seq 1 "$PAIRS"); do
  run "c1-$i" 1 16 "$i"
  run "c$CLIENTS-$i" "$CLIENTS" $((CLIENTS * 2)) "$i"
done
python3 - "$OUT_DIR" "$PAIRS" "$CLIENTS" <<'PY'
import json, sys, os, statistics
d, pairs, c = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ratios = []
print(f"{'pair':>4} {'c1 tok/s':>9} {'c' + c + ' tok/s':>10} {'ratio':>6}")
for i in range(1, pairs + 1):
    a = json.load(open(os.path.join(d, f"c1-{i}.json")))["output_tokens_per_s"]
    b = json.load(open(os.path.join(d, f"c{c}-{i}.json")))["output_tokens_per_s"]
    ratios.append(b / a)
    print(f"{i:>4} {a:>9.1f} {b:>10.1f} {b / a:>6.2f}")
print(f"median ratio c{c} / c1: {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
PY
