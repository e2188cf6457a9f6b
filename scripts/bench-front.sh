#!/usr/bin/env bash
# Throughput of gshare serve for the bundled echo function, driven by wrk on this machine.
#
#   bash scripts/bench-front.sh [SECONDS] [CONNECTIONS] [POLICY]   # default 20 64 gshare
#
# Starts gshare serve (two emulated GPUs, POLICY) on a free port of 127.0.0.1 with a fresh data
# directory under /tmp, adds a tenant, deploys the echo runtime for it, warms it, runs
# `wrk -t1 -cCONNECTIONS -dSECONDS` posting one small KServe v2 inference request, prints wrk's
# report and the server's outcome counters, and stops the server. Needs the build (scripts/build.sh)
# and wrk (Debian package wrk). The figures in docs/serve.md come from this script.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/serve-url.sh
SECONDS_TO_RUN="${1:-20}"
CONNECTIONS="${2:-64}"
POLICY="${3:-gshare}"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is not installed (apt-get install curl)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/gshare-bench-front.XXXXXX)"
chmod 0711 "$WORK"
./build/gshare serve --data-dir "$WORK/data" --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --device emulated --policy "$POLICY" \
  --max-in-flight 4096 >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVER=$!
cleanup() {
  kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" || true
  rm -rf "$WORK"
}
trap cleanup EXIT
URL="$(serve_url "$SERVER" "$WORK/serve.out" "$WORK/serve.log")" || exit 1
ADMIN="$(cat "$WORK/data/admin.key")"
KEY="$(curl -sf -XPOST -H "Authorization: Bearer $ADMIN" -d '{"name":"bench"}' \
  "$URL/api/v1/tenants" | sed -n 's/.*"key":"\([^"]*\)".*/\1/p')"
curl -sf -XPOST -H "Authorization: Bearer $KEY" --data-binary @- "$URL/api/v1/functions" \
  >/dev/null <<'SPEC'
{"name": "echo", "model_size": "1Mi", "gpu_memory": "8Mi", "exec_latency": "1ms", "slo": "1s",
 "max_batch": 8, "runtime": "echo", "timeout": "10s"}
SPEC
BODY='{"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]}'
for _ in $(seq 1 600); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY" \
    "$URL/v2/models/echo/ready")" = 200 ] && break
  sleep 0.1
done
for _ in $(seq 1 20); do
  curl -sf -XPOST -H "Authorization: Bearer $KEY" -d "$BODY" "$URL/v2/models/echo/infer" >/dev/null
done
cat >"$WORK/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $KEY"
LUA
echo "wrk -t1 -c$CONNECTIONS -d${SECONDS_TO_RUN}s against $URL/v2/models/echo/infer ($POLICY policy)"
wrk -t1 -c"$CONNECTIONS" -d"${SECONDS_TO_RUN}s" --latency -s "$WORK/post.lua" \
  "$URL/v2/models/echo/infer"
echo "server outcomes:"
curl -sf -H "Authorization: Bearer $ADMIN" "$URL/metrics" | grep '^gshare_requests_total' || true
