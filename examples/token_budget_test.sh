#!/usr/bin/env bash
# examples/token_budget end to end on a tiny synthetic model: the station in the topology cuts a
# tenant off at its budget (a running request cancelled, the next refused) while another tenant
# is served, and brigade's request_log beside it writes one line per request.
set -euo pipefail
brigade=$1
example=$2
topology=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$brigade" make-model --out "$dir/m" --hidden 64 --layers 2 --heads 4 --kv-heads 2 --intermediate 128 --vocab 300 \
  --max-position 512 --dtype f32 >/dev/null
printf 'a\tOnce upon a time\na\tthe cat sat\nb\ta third prompt\na\ta fourth\n' >"$dir/requests.txt"
BRIGADE_LOG_LEVEL=info "$example" --model "$dir/m" --topology "$topology" --max-tokens 12 <"$dir/requests.txt" >"$dir/out.txt" 2>"$dir/log.txt"
cat "$dir/out.txt"
expect() {  # line N of out.txt must match the extended regex
  sed -n "$1p" "$dir/out.txt" | grep -qE "$2" || { echo "line $1 does not match: $2"; cat "$dir/log.txt"; exit 1; }
}
expect 1 '^a \[length\] 12 tokens$'
# The budget (20) runs out during the second request: it is cancelled (or, if its last tokens
# were already made when the cancel arrived, it ends by length); either way at least 8 tokens.
expect 2 '^a \[(abort|length)\] (8|9|10|11|12) tokens$'
expect 3 '^b \[length\] 12 tokens$'
expect 4 "^a \\[error\\] tenant 'a' has spent its budget of 20 tokens$"
[ "$(grep -c '"labels":{"tenant":' "$dir/log.txt")" = 4 ] || { echo "want 4 request_log lines:"; cat "$dir/log.txt"; exit 1; }

# A bad option of the program's station stops the engine with the station's name.
sed 's/tokens: 20/tokens: 0/' "$topology" >"$dir/bad.yaml"
if "$example" --model "$dir/m" --topology "$dir/bad.yaml" </dev/null 2>"$dir/err.txt"; then exit 1; fi
grep -q "station 'token_budget': tokens must be >= 1" "$dir/err.txt" || { cat "$dir/err.txt"; exit 1; }
echo "token_budget: ok"
