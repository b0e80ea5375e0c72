#!/usr/bin/env bash
# Mixture-of-experts under tensor parallelism on the CPU: one synthetic Qwen3-MoE-shaped model
# (16 experts, top-2, every layer sparse) served offline by the engine as
#   tp1      one executor on every thread,
#   columns  tp 2, every expert split by columns (each rank: all experts, half their width),
#   experts  tp 2 with expert_parallel (each rank: 8 whole experts),
# each at a decode-heavy load (output tokens/s) and a prefill-heavy one (prompt + output
# tokens/s), with TTFT and TPOT, from
# `brigade bench --offline`; the three runs of a load go back to back, interleaved over REPEAT
# rounds, since this machine's speed drifts between runs.
#   bash bench/serving/experts.sh          (needs a built build/tools/brigade)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/serving/common.sh
OUT_DIR=${OUT_DIR:-.brigade/bench-experts}
MODEL=${MODEL:-.brigade/models/bench-moe-16x2}
REPEAT=${REPEAT:-2}
THREADS=${THREADS:-$(nproc)}
mkdir -p "$OUT_DIR"
if [ ! -f "$MODEL/model.safetensors" ]; then
  "$BRIGADE" make-model --arch qwen3_moe --out "$MODEL" --hidden 512 --layers 4 --heads 8 --kv-heads 4 \
    --intermediate 1024 --experts 16 --experts-per-tok 2 --moe-intermediate 512 --vocab 4096 \
    --max-position 4096 --dtype bf16 >/dev/null
fi

topology() {  # name tp expert_parallel threads
  {
    echo "instances:"
    echo "  - name: $1"
    echo "    kv: {memory_mb: 256}"
    echo "    executors: [{device: cpu, threads: $4, tp: $2, expert_parallel: $3}]"
  } >"$OUT_DIR/$1.yaml"
}
half=$(( THREADS / 2 > 0 ? THREADS / 2 : 1 ))
topology tp1 1 false "$THREADS"
topology columns 2 false "$half"
topology experts 2 true "$half"

for round in $(seq 1 "$REPEAT"); do
  for load in decode prefill; do
    if [ "$load" = decode ]; then args=(--requests 32 --input-len 16 --output-len 64); else args=(--requests 16 --input-len 512 --output-len 4); fi
    for name in tp1 columns experts; do
      "$BRIGADE" bench --offline --model "$MODEL" --topology "$OUT_DIR/$name.yaml" "${args[@]}" --seed 3 \
        --json "$OUT_DIR/$name-$load-$round.json" >"$OUT_DIR/$name-$load-$round.txt" 2>"$OUT_DIR/$name-$load-$round.log"
    done
  done
done

python3 - "$OUT_DIR" "$REPEAT" <<'PY'
import json, os, sys
d, repeat = sys.argv[1], int(sys.argv[2])
# decode: output tokens/s; prefill: prompt + output tokens/s (its outputs are 4 tokens).
metric = {"decode": "output_tokens_per_s", "prefill": "total_tokens_per_s"}
print(f"{'load':<8} {'split':<8} {'tok/s (per round)':<26} {'vs tp1':>7} {'TTFT p50':>9} {'TPOT p50':>9}")
for load in ["decode", "prefill"]:
    read = lambda name, r: json.load(open(os.path.join(d, f"{name}-{load}-{r}.json")))
    base = [read("tp1", r)[metric[load]] for r in range(1, repeat + 1)]
    for name in ["tp1", "columns", "experts"]:
        js = [read(name, r) for r in range(1, repeat + 1)]
        tok = [j[metric[load]] for j in js]
        ratio = sum(t / b for t, b in zip(tok, base)) / len(tok)
        print(f"{load:<8} {name:<8} {' / '.join(f'{t:.1f}' for t in tok):<26} {ratio:>6.2f}x "
              f"{js[-1]['ttft_s']['p50']*1e3:>7.1f}ms {js[-1]['tpot_s']['p50']*1e3:>7.2f}ms")
PY
