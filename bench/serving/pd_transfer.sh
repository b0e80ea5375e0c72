#!/usr/bin/env bash
# What PD separation's data plane costs between processes: one prefill and one decode `brigade
# node` process behind a front (docs/architecture.md "PD separation", "Processes"), whose
# hand-offs carry their KV bytes either inline (through the front's router: two local TCP hops
# and two Cap'n Proto serialisations) or in a POSIX shared-memory segment that the decode
# process maps (pd.transfer: shm; the message carries only the segment's name). The model is
# synthetic and KV-heavy (16 layers, 8 KV heads of 128: 64 KiB of bf16 K/V per token), the
# prompts long (INPUT_MIN..INPUT_MAX tokens), so a hand-off is tens of MB. Reported per
# transfer: hand-offs, MB moved, the mean transfer time (first token at the prefill scheduler ->
# pages written on the decode instance: brigade_pd_transfer_seconds_total / transfers), its
# throughput and its ratio to the copy bandwidth the nodes measured at start (a hand-off reads and
# writes each byte at least twice: pages -> buffer -> pages), and the clients' TTFT / TPOT (a
# sequence's second token waits for its hand-off). Each transfer on fresh processes.
#   bash bench/serving/pd_transfer.sh        (needs a built build/tools/brigade)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/serving/common.sh
OUT_DIR=${OUT_DIR:-.brigade/bench-pd-transfer}
PORT=${PORT:-8318}
NODE_PORT=${NODE_PORT:-8418}
MODEL=${MODEL:-.brigade/models/bench-llama-kv-heavy}
REQUESTS=${REQUESTS:-8}
CONCURRENCY=${CONCURRENCY:-1}
INPUT_MIN=${INPUT_MIN:-768}
INPUT_MAX=${INPUT_MAX:-1536}
OUTPUT=${OUTPUT:-8}
mkdir -p "$OUT_DIR"
if [ ! -f "$MODEL/model.safetensors" ]; then
  "$BRIGADE" make-model --out "$MODEL" --hidden 256 --layers 16 --heads 8 --kv-heads 8 --head-dim 128 \
    --intermediate 512 --vocab 4096 --max-position 4096 --dtype bf16 >/dev/null
fi
trap stop_server EXIT

run() {  # transfer: inline | shm
  local transfer=$1 file="$OUT_DIR/$1.yaml"
  {
    echo "pd: {transfer: $transfer}"
    echo "instances:"
    local i=0
    for role in prefill decode; do
      echo "  - name: $role"
      echo "    role: $role"
      echo "    remote: 127.0.0.1:$((NODE_PORT + i))"
      echo "    kv: {memory_mb: 512, dtype: bf16}"
      echo "    executors: [{device: cpu, threads: 1}]"
      i=$((i + 1))
    done
  } >"$file"
  start_server "$MODEL" "$file" "$PORT" "$OUT_DIR/$transfer.log" --launch-nodes  # and its two nodes
  "$BRIGADE" bench --port "$PORT" --requests "$REQUESTS" --concurrency "$CONCURRENCY" --input-len "$INPUT_MIN" \
    --input-len-max "$INPUT_MAX" --output-len "$OUTPUT" --seed 17 --json "$OUT_DIR/$transfer.json" \
    >"$OUT_DIR/$transfer.txt"
  fetch_metrics "$PORT" "$OUT_DIR/$transfer.metrics"
  stop_server
}

for transfer in inline shm; do run "$transfer"; done

python3 - "$OUT_DIR" <<'PY'
import json, os, re, sys
d = sys.argv[1]
print(f"{'transfer':<8} {'hand-offs':>9} {'via shm':>7} {'MB moved':>8} {'transfer ms':>11} {'GB/s':>6} "
      f"{'of copy bw':>10} {'TTFT p50':>9} {'TPOT p50':>9} {'errors':>6}")
for transfer in ["inline", "shm"]:
    j = json.load(open(os.path.join(d, transfer + ".json")))
    text = open(os.path.join(d, transfer + ".metrics")).read()
    def num(name):  # summed over the instance labels
        return sum(float(v) for v in re.findall(r"^" + name + r"(?:\{[^}]*\})? (\S+)$", text, re.M))
    n = num("brigade_pd_transfers_in_total")
    mb = num("brigade_pd_bytes_in_total") / 1e6
    s = num("brigade_pd_transfer_seconds_total")
    gbs = mb / 1e3 / s if s else 0.0
    peak = num("brigade_device_peak_bytes_per_second") / 1e9
    t, f = j["tpot_s"], j["ttft_s"]
    print(f"{transfer:<8} {n:>9.0f} {num('brigade_pd_shm_transfers_in_total'):>7.0f} {mb:>8.1f} "
          f"{1e3 * s / n if n else 0:>11.1f} {gbs:>6.2f} {gbs / peak if peak else 0:>10.3f} {f['p50']*1e3:>7.0f}ms "
          f"{t['p50']*1e3:>7.2f}ms {j['errors']:>6}")
print(f"copy bandwidth measured by the nodes at start: {peak:.1f} GB/s")
PY
