#!/usr/bin/env bash
# What a process boundary costs: the same two CPU instances (1 thread each, least_load router)
# either inside the serving process or each in its own `brigade node` process behind a front
# that only tokenizes, routes and serves HTTP (docs/architecture.md "Processes"). Every request
# and every TokenEvent then crosses a local TCP connection (CAF's middleman) twice. Load:
# REQUESTS requests of INPUT_MIN..INPUT_MAX prompt tokens and OUTPUT tokens, CONCURRENCY clients.
# Reported: TTFT and TPOT p50/p99 and output tokens/s per layout; each layout on fresh processes.
#   bash bench/serving/nodes.sh        (needs a built build/tools/brigade)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/serving/common.sh
OUT_DIR=${OUT_DIR:-.brigade/bench-nodes}
PORT=${PORT:-8316}
NODE_PORT=${NODE_PORT:-8416}
MODEL=${MODEL:-.brigade/models/bench-llama-4k}
REQUESTS=${REQUESTS:-64}
CONCURRENCY=${CONCURRENCY:-8}
INPUT_MIN=${INPUT_MIN:-16}
INPUT_MAX=${INPUT_MAX:-256}
OUTPUT=${OUTPUT:-64}
mkdir -p "$OUT_DIR"
ensure_bench_model "$MODEL"
trap stop_server EXIT

run() {  # layout: in_process | nodes
  local layout=$1 file="$OUT_DIR/$1.yaml"
  {
    echo "router: {policy: least_load}"
    echo "instances:"
    for i in 0 1; do
      echo "  - name: dp$i"
      if [ "$layout" = nodes ]; then echo "    remote: 127.0.0.1:$((NODE_PORT + i))"; fi
      echo "    kv: {memory_mb: 256}"
      echo "    executors: [{device: cpu, threads: 1}]"
    done
  } >"$file"
  local launch=()
  if [ "$layout" = nodes ]; then launch=(--launch-nodes); fi  # the front starts (and stops) the nodes
  start_server "$MODEL" "$file" "$PORT" "$OUT_DIR/$layout.log" "${launch[@]}"
  "$BRIGADE" bench --port "$PORT" --requests "$REQUESTS" --concurrency "$CONCURRENCY" --input-len "$INPUT_MIN" \
    --input-len-max "$INPUT_MAX" --output-len "$OUTPUT" --seed 13 --json "$OUT_DIR/$layout.json" >"$OUT_DIR/$layout.txt"
  stop_server
}

for layout in in_process nodes; do run "$layout"; done

python3 - "$OUT_DIR" <<'PY'
import json, os, sys
d = sys.argv[1]
print(f"{'layout':<11} {'TTFT p50':>9} {'p99':>8} {'TPOT p50':>9} {'p99':>8} {'out tok/s':>9} {'errors':>6}")
for layout in ["in_process", "nodes"]:
    j = json.load(open(os.path.join(d, layout + ".json")))
    t, f = j["tpot_s"], j["ttft_s"]
    print(f"{layout:<11} {f['p50']*1e3:>7.1f}ms {f['p99']*1e3:>6.1f}ms {t['p50']*1e3:>7.2f}ms {t['p99']*1e3:>6.2f}ms "
          f"{j['output_tokens_per_s']:>9.1f} {j['errors']:>6}")
PY
