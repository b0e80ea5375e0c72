#!/usr/bin/env bash
# Prefill/decode separation vs colocation on one machine: the same two CPU executors (1 thread
# each) either as two colocated instances behind the router (least_load; each instance mixes
# prompt chunks into its decode steps) or as one prefill and one decode instance (the decode
# instance never runs a prompt chunk). Load: prompts of INPUT_MIN..INPUT_MAX tokens (long ones
# arrive while others decode), OUTPUT tokens each, CONCURRENCY clients. The measure is the decode
# side: TPOT (mean time between a request's later tokens) p50/p99, and TTFT, which PD pays for
# with the hand-off. Each layout runs on a fresh server.
#   bash bench/serving/pd.sh           (needs a built build/tools/brigade)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/serving/common.sh
OUT_DIR=${OUT_DIR:-.brigade/bench-pd}
PORT=${PORT:-8314}
MODEL=${MODEL:-.brigade/models/bench-llama-4k}
REQUESTS=${REQUESTS:-48}
CONCURRENCY=${CONCURRENCY:-6}
INPUT_MIN=${INPUT_MIN:-16}
INPUT_MAX=${INPUT_MAX:-1536}
OUTPUT=${OUTPUT:-48}
mkdir -p "$OUT_DIR"
ensure_bench_model "$MODEL"

run() {  # layout
  local layout=$1
  {
    echo "instances:"
    if [ "$layout" = colocated ]; then
      for i in 0 1; do
        echo "  - name: dp$i"
        echo "    kv: {memory_mb: 256}"
        echo "    executors: [{device: cpu, threads: 1}]"
      done
      echo "router: {policy: least_load}"
    else
      echo "  - name: prefill0"
      echo "    role: prefill"
      echo "    kv: {memory_mb: 256}"
      echo "    executors: [{device: cpu, threads: 1}]"
      echo "  - name: decode0"
      echo "    role: decode"
      echo "    kv: {memory_mb: 256}"
      echo "    executors: [{device: cpu, threads: 1}]"
    fi
  } >"$OUT_DIR/$layout.yaml"
  start_server "$MODEL" "$OUT_DIR/$layout.yaml" "$PORT" "$OUT_DIR/$layout.log"
  "$BRIGADE" bench --port "$PORT" --requests "$REQUESTS" --concurrency "$CONCURRENCY" --input-len "$INPUT_MIN" \
    --input-len-max "$INPUT_MAX" --output-len "$OUTPUT" --seed 11 --json "$OUT_DIR/$layout.json" >"$OUT_DIR/$layout.txt"
  fetch_metrics "$PORT" "$OUT_DIR/$layout.metrics"
  stop_server
}

for layout in colocated pd; do run "$layout"; done

python3 - "$OUT_DIR" <<'PY'
import json, os, re, sys
d = sys.argv[1]
print(f"{'layout':<10} {'TPOT p50':>9} {'p99':>8} {'TTFT p50':>9} {'p99':>8} {'out tok/s':>9} {'errors':>6} {'hand-offs':>9} {'MB moved':>8} {'transfer ms':>11}")
for layout in ["colocated", "pd"]:
    j = json.load(open(os.path.join(d, layout + ".json")))
    text = open(os.path.join(d, layout + ".metrics")).read()
    def num(name):  # summed over the instance labels
        return sum(float(v) for v in re.findall(r"^" + name + r"(?:\{[^}]*\})? (\S+)$", text, re.M))
    n = num("brigade_pd_transfers_in_total")
    mb = num("brigade_pd_bytes_in_total") / 1e6
    ms = 1e3 * num("brigade_pd_transfer_seconds_total") / n if n else 0.0
    t, f = j["tpot_s"], j["ttft_s"]
    print(f"{layout:<10} {t['p50']*1e3:>7.1f}ms {t['p99']*1e3:>6.1f}ms {f['p50']*1e3:>7.0f}ms {f['p99']*1e3:>6.0f}ms "
          f"{j['output_tokens_per_s']:>9.1f} {j['errors']:>6} {n:>9.0f} {mb:>8.1f} {ms:>11.1f}")
PY
