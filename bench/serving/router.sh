#!/usr/bin/env bash
# Data parallelism: two CPU instances behind the router, cache_aware vs round_robin vs
# least_load, under a multi-turn chat workload whose prompts share prefixes (4 system prompts
# of PREFIX tokens; each conversation's turns extend its previous turn). On this 2-core machine
# two instances do not add throughput; what the router changes is where each prompt's prefix is
# cached: the measure is prefix-cache hit tokens (summed over instances) and TTFT.
# Each policy runs on a fresh server (both instances on 1 thread each; same model, same load).
#   bash bench/serving/router.sh           (needs a built build/tools/brigade)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/serving/common.sh
OUT_DIR=${OUT_DIR:-.brigade/bench-router}
PORT=${PORT:-8313}
MODEL=${MODEL:-.brigade/models/bench-llama-4k}
CONVERSATIONS=${CONVERSATIONS:-16}
TURNS=${TURNS:-4}
PREFIX=${PREFIX:-512}
mkdir -p "$OUT_DIR"
ensure_bench_model "$MODEL"

run() {  # policy
  local policy=$1
  {
    echo "instances:"
    for i in 0 1; do
      echo "  - name: dp$i"
      echo "    kv: {memory_mb: 256}"
      echo "    executors: [{device: cpu, threads: 1}]"
    done
    echo "router: {policy: $policy}"
  } >"$OUT_DIR/$policy.yaml"
  start_server "$MODEL" "$OUT_DIR/$policy.yaml" "$PORT" "$OUT_DIR/$policy.log"
  "$BRIGADE" bench --port "$PORT" --requests $((CONVERSATIONS * TURNS)) --turns "$TURNS" --concurrency 4 \
    --shared-prefix "$PREFIX" --prefix-groups 4 --input-len 64 --output-len 16 --seed 7 \
    --json "$OUT_DIR/$policy.json" >"$OUT_DIR/$policy.txt"
  fetch_metrics "$PORT" "$OUT_DIR/$policy.metrics"
  stop_server
}

for policy in round_robin least_load cache_aware; do run "$policy"; done

python3 - "$OUT_DIR" <<'PY'
import json, os, re, sys
d = sys.argv[1]
print(f"{'policy':<12} {'TTFT p50':>9} {'p90':>8} {'out tok/s':>9} {'errors':>6} {'prompt tok':>10} {'hit tok':>8} {'hit %':>6}  routed (instance: cache/load/rr)")
for p in ["round_robin", "least_load", "cache_aware"]:
    j = json.load(open(os.path.join(d, p + ".json")))
    text = open(os.path.join(d, p + ".metrics")).read()
    num = lambda name: float(re.search(r"^" + name + r" (\S+)$", text, re.M).group(1))
    prompt, hit = num("brigade_prompt_tokens_total"), num("brigade_prefix_cache_hit_tokens_total")
    routed = {}
    for inst, reason, n in re.findall(r'^brigade_router_requests_total\{instance="(\w+)",reason="(\w+)"\} (\d+)$', text, re.M):
        routed.setdefault(inst, {})[reason] = n
    routes = " ".join(f"{i}: {r['cache']}/{r['load']}/{r['round_robin']}" for i, r in sorted(routed.items()))
    t = j["ttft_s"]
    print(f"{p:<12} {t['p50']*1e3:>7.0f}ms {t['p90']*1e3:>6.0f}ms {j['output_tokens_per_s']:>9.1f} {j['errors']:>6} "
          f"{prompt:>10.0f} {hit:>8.0f} {100*hit/prompt:>5.1f}%  {routes}")
PY
