#!/usr/bin/env bash
# Shared-prefix benchmark (issue #5). 64 requests, each a 2048-token system prompt plus a
# distinct 64-token tail, 16 output tokens, 4 concurrent streaming clients, on a small synthetic
# Llama with a 4096-token context (the default 100M model's context is 2048, and 64 cold 2k
# prefills of it take minutes on a CPU). Runs, each on a fresh server:
#   nocache      radix cache off: every prompt is prefilled whole
#   device       radix cache on (default): the prefix is computed once and shared
#   tiers        8 distinct system prompts (8 x 2048 tokens) with a device pool of 400 pages
#                (6400 tokens) and host + disk tiers: most prefixes come back from the tiers
#   tiers-nohc   the same 8-prompt workload with the device cache only (evicted = recomputed)
#   disk-cold    disk tier only (host off), an empty disk directory
#   disk-warm    the same, after a restart on the disk directory disk-cold filled
# Prints TTFT and throughput per run and the TTFT ratio of each to nocache.
#   bash bench/serving/prefix_cache.sh     (needs a built build/tools/brigade)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/serving/common.sh
OUT_DIR=${OUT_DIR:-.brigade/bench-prefix}
PORT=${PORT:-8312}
MODEL=${MODEL:-.brigade/models/bench-llama-4k}
REQUESTS=${REQUESTS:-64}   # smaller values only to try the script out
PREFIX=${PREFIX:-2048}
mkdir -p "$OUT_DIR"
ensure_bench_model "$MODEL"
rm -rf "$OUT_DIR/disk"

run() {  # name cache-yaml kv-yaml prefix-groups
  local name=$1 cache=$2 kv=$3 groups=$4
  topology "$OUT_DIR/$name.yaml" "max_running: 64" "$cache" "$kv"
  start_server "$MODEL" "$OUT_DIR/$name.yaml" "$PORT" "$OUT_DIR/$name.log"
  "$BRIGADE" bench --port "$PORT" --requests "$REQUESTS" --concurrency 4 --shared-prefix "$PREFIX" --prefix-groups "$groups" \
    --input-len 64 --output-len 16 --seed 5 --json "$OUT_DIR/$name.json" >"$OUT_DIR/$name.txt"
  curl_metrics "$OUT_DIR/$name.metrics"
  stop_server
}

curl_metrics() {
  fetch_metrics "$PORT" "$1.all"
  grep -E '^brigade_(prefix_cache|tier)_' "$1.all" >"$1" || true
}

run nocache "radix: false" "" 1
run device "radix: true" "" 1
run tiers "radix: true, host_bytes: 268435456, disk_path: $OUT_DIR/disk-tiers" "pages: 400" 8
run tiers-nohc "radix: true" "pages: 400" 8
run disk-cold "radix: true, host_bytes: 0, disk_path: $OUT_DIR/disk" "" 1
run disk-warm "radix: true, host_bytes: 0, disk_path: $OUT_DIR/disk" "" 1
rm -rf "$OUT_DIR/disk-tiers"

python3 - "$OUT_DIR" <<'PY'
import json, sys, os
d = sys.argv[1]
rows = ["nocache", "device", "tiers", "tiers-nohc", "disk-cold", "disk-warm"]
base = json.load(open(os.path.join(d, "nocache.json")))["ttft_s"]["p50"]
print(f"{'run':<11} {'TTFT p50':>9} {'p90':>8} {'p99':>8} {'cold/this':>9} {'out tok/s':>9} {'req/s':>6} {'errors':>6}  cache counters")
for r in rows:
    j = json.load(open(os.path.join(d, r + ".json")))
    t = j["ttft_s"]
    m = {}
    for line in open(os.path.join(d, r + ".metrics")):
        k, v = line.rsplit(" ", 1)
        m[k] = float(v)
    hit = m.get("brigade_prefix_cache_hit_tokens_total", 0)
    loaded = m.get("brigade_prefix_cache_loaded_tokens_total", 0)
    print(f"{r:<11} {t['p50']*1e3:>7.0f}ms {t['p90']*1e3:>6.0f}ms {t['p99']*1e3:>6.0f}ms {base/t['p50']:>8.1f}x "
          f"{j['output_tokens_per_s']:>9.1f} {j['requests_per_s']:>6.2f} {j['errors']:>6}  "
          f"device hits {hit:.0f} tok, tier loads {loaded:.0f} tok")
PY
