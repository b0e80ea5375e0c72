#!/usr/bin/env bash
# examples/batch_service end to end on a tiny synthetic model: every prompt comes back with its
# text, greedy text is the same on a second run, a bad option is refused, and a budget too short
# for the work cancels the requests still running (each still ends, with finish = abort).
set -euo pipefail
brigade=$1
service=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$brigade" make-model --out "$dir/m" --hidden 64 --layers 2 --heads 4 --kv-heads 2 --intermediate 128 --vocab 300 \
  --max-position 512 --dtype f32 >/dev/null
printf 'Once upon a time\n\nthe cat sat\na third prompt\n' >"$dir/prompts.txt"
cat >"$dir/topology.yaml" <<'YAML'
instances:
  - executors:
      - threads: 1
        roofline: false
YAML

"$service" --model "$dir/m" --topology "$dir/topology.yaml" --max-tokens 12 <"$dir/prompts.txt" >"$dir/a.txt"
[ "$(grep -c '^\[length\] 12 tokens: ' "$dir/a.txt")" = 3 ] || { cat "$dir/a.txt"; exit 1; }
grep -q '^engine: 3 requests, .* 36 generated tokens' "$dir/a.txt" || { cat "$dir/a.txt"; exit 1; }
"$service" --model "$dir/m" --topology "$dir/topology.yaml" --max-tokens 12 <"$dir/prompts.txt" >"$dir/b.txt"
# The texts, not the step count: how requests share steps depends on timing.
cmp <(grep '^\[' "$dir/a.txt") <(grep '^\[' "$dir/b.txt") || { diff "$dir/a.txt" "$dir/b.txt"; exit 1; }

if "$service" --model "$dir/m" --max-tokens 4 --bogus 1 </dev/null 2>"$dir/err.txt"; then exit 1; fi
grep -q "unknown option --bogus" "$dir/err.txt"

# 480 tokens each cannot be made in 1 ms: every request is cancelled, and still reported.
"$service" --model "$dir/m" --topology "$dir/topology.yaml" --max-tokens 480 --budget-ms 1 <"$dir/prompts.txt" >"$dir/c.txt"
[ "$(grep -c '^\[abort\] ' "$dir/c.txt")" = 3 ] || { cat "$dir/c.txt"; exit 1; }
echo "batch_service: ok"
