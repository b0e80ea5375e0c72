#!/usr/bin/env bash
# The `brigade` commands end to end on a tiny synthetic model: the main job (`demo`: server, a
# chat completion, a streaming load, the summary table) and `bench --offline`, whose JSON must
# count every request and every output token.
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" make-model --out "$dir/m" --hidden 64 --layers 2 --heads 4 --kv-heads 2 --intermediate 128 --vocab 300 \
  --max-position 512 --dtype f32 >/dev/null

"$bin" demo --model "$dir/m" --requests 6 --concurrency 3 --threads 1 >"$dir/demo.txt"
grep -q "POST /v1/chat/completions ->" "$dir/demo.txt"
grep -q "online: 6 requests (0 errors)" "$dir/demo.txt"
grep -q "brigade_requests_finished_total 7" "$dir/demo.txt"  # the chat completion and the six

"$bin" bench --offline --model "$dir/m" --threads 1 --requests 5 --input-len 8 --input-len-max 40 --output-len 7 \
  --json "$dir/offline.json" >"$dir/offline.txt"
python3 - "$dir/offline.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["mode"] == "offline", j
assert j["errors"] == 0, j
assert j["requests"] == 5 and j["output_tokens"] == 35, j
assert j["output_tokens_per_s"] > 0 and j["ttft_s"]["p50"] > 0, j
PY
echo "cli smoke: ok"
