# Shared by the serving benchmarks: start a `brigade serve` with a topology, wait until it
# answers, stop it. Sourced, not run.
BRIGADE=${BRIGADE:-build/tools/brigade}

# ensure_bench_model DIR: the serving benchmarks' synthetic Llama (hidden 256, 4 layers, 4096
# ids and positions, bf16), written unless DIR holds a model already.
ensure_bench_model() {
  if [ ! -f "$1/model.safetensors" ]; then
    "$BRIGADE" make-model --out "$1" --hidden 256 --layers 4 --heads 4 --kv-heads 2 --intermediate 768 \
      --vocab 4096 --max-position 4096 --dtype bf16 >/dev/null
  fi
}

# start_server MODEL TOPOLOGY PORT LOG [FLAGS...]: starts the server in the background (pid in
# SERVER_PID) with any further serve flags (--launch-nodes: it starts the topology's nodes too)
# and waits until it accepts connections.
start_server() {
  "$BRIGADE" serve --model "$1" --topology "$2" --port "$3" "${@:5}" >"$4" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 600); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$3") 2>/dev/null; then return 0; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then echo "server failed to start:" >&2; cat "$4" >&2; return 1; fi
    sleep 0.2
  done
  echo "server did not come up on port $3" >&2
  return 1
}

stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
}

# topology FILE [scheduler lines] -- [cache lines]: writes a one-instance topology.
topology() {
  local file=$1 sched=$2 cache=$3 kv=${4:-}
  {
    echo "instances:"
    echo "  - name: main"
    echo "    scheduler: {$sched}"
    echo "    cache: {$cache}"
    if [ -n "$kv" ]; then echo "    kv: {$kv}"; fi
  } >"$file"
}

# fetch_metrics PORT FILE: the server's /metrics into FILE, without curl (a fresh Debian has
# none): bash's /dev/tcp.
fetch_metrics() {
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
  cat <&3 >"$2"
  exec 3<&-
}

