#!/usr/bin/env bash
# Sustained load on gshare serve: RATE requests/s of the echo function (Poisson arrivals) for
# SECONDS, sent by `gshare replay` on this machine, while the server's resident memory is sampled
# every 5 s. Prints the replay's table and statuses, and the memory samples.
#
#   bash scripts/bench-sustained.sh [RATE] [SECONDS] [CONCURRENCY]   # default 20000 60 256
#
# Needs the build (scripts/build.sh). The figures in docs/serve.md come from this script.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/serve-url.sh
RATE="${1:-20000}"
DURATION="${2:-60}"
CONCURRENCY="${3:-256}"
WORK="$(mktemp -d /tmp/gshare-sustained.XXXXXX)"
chmod 0711 "$WORK"
cat >"$WORK/catalog.yaml" <<'CATALOG'
functions:
  - name: echo
    tenant: load
    model: echo
    model_size: 1Mi
    gpu_memory: 8Mi
    exec_latency: 1ms
    slo: 1s
    max_batch: 8
    runtime: echo
    timeout: 10s
CATALOG
./build/gshare workload --catalog "$WORK/catalog.yaml" --duration "${DURATION}s" --seed 1 \
  --rps "$RATE" --burst-cv 1 --out "$WORK/workload" >/dev/null
./build/gshare serve --data-dir "$WORK/data" --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --device emulated --max-in-flight 4096 \
  >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVER=$!
SAMPLER=""
cleanup() {
  [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null || true
  kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" || true
  rm -rf "$WORK"
}
trap cleanup EXIT
URL="$(serve_url "$SERVER" "$WORK/serve.out" "$WORK/serve.log")" || exit 1
( while kill -0 "$SERVER" 2>/dev/null; do
    echo "$(date +%s) $(awk '/VmRSS/ {print $2}' /proc/"$SERVER"/status) kB"
    sleep 5
  done ) >"$WORK/rss.txt" &
SAMPLER=$!
status=0
./build/gshare replay --url "$URL" --catalog "$WORK/catalog.yaml" \
  --trace "$WORK/workload/invocations.csv" --admin-key-file "$WORK/data/admin.key" \
  --concurrency "$CONCURRENCY" --out "$WORK/replay" || status=$?
echo "server resident memory (unix time, VmRSS):"
cat "$WORK/rss.txt"
exit "$status"
