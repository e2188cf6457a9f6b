#!/usr/bin/env bash
# The main job, live: installs what is missing, builds, starts `gshare serve` on emulated GPUs,
# replays a 5-minute multi-tenant trace generated for the example functions against it over HTTP
# (the functions deployed as their tenants' through the API), prints the live table beside the
# simulator's prediction of the same requests on the same node, writes the figures to out/live/,
# and stops the server cleanly (SIGTERM: it drains and stops its function processes).
#
#   bash scripts/run.sh [DURATION]      # default 5m
#
# The server's data directory is a fresh folder under /tmp (tenants' function processes enter it
# where the server runs as root); its log is out/live/serve.log.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/serve-url.sh
bash scripts/build.sh gshare gshare-function gshare-init

DURATION="${1:-5m}"
OUT=out/live
rm -rf "$OUT"
mkdir -p "$OUT"
DATA="$(mktemp -d /tmp/gshare-live.XXXXXX)"
chmod 0711 "$DATA"
# The programs, the example catalog and its weights where the tenants' function processes can
# reach them: as root the server runs those as the tenants' uids, and a checkout under /root is
# closed to them. gshare-function and gshare-init must sit beside gshare.
mkdir -p "$DATA/bin"
chmod 0755 "$DATA/bin"
cp build/gshare build/gshare-function build/gshare-init "$DATA/bin/"
chmod 0755 "$DATA/bin/gshare" "$DATA/bin/gshare-function" "$DATA/bin/gshare-init"
CATALOG="$DATA/examples/catalog.yaml"
mkdir -p "$DATA/examples"
chmod 0755 "$DATA/examples"
cp examples/catalog.yaml "$CATALOG"
./build/gshare examples weights --out "$DATA/examples/weights" >/dev/null
chmod 0755 "$DATA/examples/weights"
chmod 0644 "$DATA/examples/weights/"*

./build/gshare workload --catalog examples/catalog.yaml --duration "$DURATION" --seed 1 --rps 20 \
  --out "$OUT/workload"

"$DATA/bin/gshare" serve --data-dir "$DATA/data" --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --gpus 2 --gpu-memory 4Gi \
  --link-bandwidth 12GB/s --snapshot-pool 1Gi >"$OUT/serve.out" 2>"$OUT/serve.log" &
SERVER=$!
SERVER_STATUS=0
stop_server() {
  if kill -0 "$SERVER" 2>/dev/null; then
    kill -TERM "$SERVER"
    wait "$SERVER" || SERVER_STATUS=$?
  fi
  rm -rf "$DATA"
}
trap stop_server EXIT

# The server prints its address once it listens (the port is chosen by the kernel).
URL="$(serve_url "$SERVER" "$OUT/serve.out" "$OUT/serve.log")" || exit 1
echo "gshare serve is listening on $URL (log: $OUT/serve.log)"

status=0
./build/gshare replay --url "$URL" --catalog "$CATALOG" \
  --trace "$OUT/workload/invocations.csv" --admin-key-file "$DATA/data/admin.key" \
  --out "$OUT" || status=$?

stop_server
trap - EXIT
echo "the server stopped (exit status $SERVER_STATUS): $(tail -n 1 "$OUT/serve.log")"
if [ "$SERVER_STATUS" -ne 0 ]; then
  echo "gshare serve did not stop cleanly; its log is $OUT/serve.log" >&2
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
