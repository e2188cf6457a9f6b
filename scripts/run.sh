#!/usr/bin/env bash
# The main job, live, on real models: installs what is missing, builds the programs it runs, makes
# six torchvision classifiers (random weights from a seed, traced to TorchScript here) and a Python
# handler for three tenants (scripts/real-models.py, which also runs each alone for its reference
# answer), starts `gshare serve` on emulated GPUs, has each tenant upload its files through the
# files API with its own key, and replays one generated multi-tenant trace against it twice over HTTP: under the gshare
# policy, then under keepalive, each on as many emulated GPUs as there are functions (a policy
# holds, and is charged for, only those it uses). Every answer is checked against the model's
# answer alone (within 1e-4 of its largest value). Prints both runs side by side with the
# simulator's prediction of each, writes the figures to out/live/, and stops the server cleanly
# after each run (SIGTERM: it drains and stops its function processes).
#
#   bash scripts/run.sh [DURATION] [RPS]      # default 2m at 6 requests a second
#
# The server's data directory is a fresh folder under /tmp (tenants' function processes enter it
# where the server runs as root); its logs are out/live/<policy>/serve.log.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/serve-url.sh
if [ "$(id -u)" -ne 0 ]; then
  # Tenants' models run as uids of their own in sandboxes the server makes with namespaces.
  echo "scripts/run.sh serves tenants' own models in sandboxes, which needs root: run it as root" >&2
  exit 1
fi
bash scripts/build.sh gshare gshare-function gshare-init gshare_fn_c

DURATION="${1:-2m}"
RPS="${2:-6}"
OUT=out/live
rm -rf "$OUT"
mkdir -p "$OUT"

# A Python with PyTorch, torchvision and numpy (scripts/setup.sh installs Debian's).
PYTHON=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null &&
    "$candidate" -c 'import torch, torchvision, numpy' 2>/dev/null; then
    PYTHON="$(command -v "$candidate")"
    break
  fi
done
if [ -z "$PYTHON" ]; then
  echo "no python3 with torch, torchvision and numpy: run scripts/setup.sh (as root)" >&2
  exit 1
fi

DATA="$(mktemp -d /tmp/gshare-live.XXXXXX)"
chmod 0711 "$DATA"
SERVER=""
stop_server() {
  if [ -n "$SERVER" ] && kill -0 "$SERVER" 2>/dev/null; then
    kill -TERM "$SERVER"
    wait "$SERVER" || SERVER_STATUS=$?
  fi
  SERVER=""
}
trap 'stop_server; rm -rf "$DATA"' EXIT

# The programs where the tenants' function processes can reach them (as root the server runs
# those as the tenants' uids, and a checkout under /root is closed to them): gshare-function,
# gshare-init, the function library and the Python runtimes sit beside gshare.
mkdir -p "$DATA/bin"
cp build/gshare build/gshare-function build/gshare-init build/libgshare-fn.so "$DATA/bin/"
cp -r build/python "$DATA/bin/python"
chmod -R a+rX "$DATA/bin"

echo "making the models (random weights, traced to TorchScript) and their answers alone:"
"$PYTHON" scripts/real-models.py --out "$OUT/models" --models-root "$DATA/data/models"
CATALOG="$OUT/models/catalog.yaml"
FUNCTIONS="$(grep -c '^  - name:' "$CATALOG")"
./build/gshare workload --catalog "$CATALOG" --duration "$DURATION" --seed 1 --rps "$RPS" \
  --out "$OUT/workload" >/dev/null
echo "the trace: $(($(wc -l <"$OUT/workload/invocations.csv") - 1)) requests over $DURATION to $FUNCTIONS functions of 3 tenants"

status=0
for policy in gshare keepalive; do
  mkdir -p "$OUT/$policy"
  SERVER_STATUS=0
  # Emulated GPUs even where the machine has NVIDIA GPUs: the pytorch and python runtimes keep
  # their models in emulated device memory (on CUDA GPUs a node serves CUDA programs).
  "$DATA/bin/gshare" serve --data-dir "$DATA/data" --listen 127.0.0.1:0 --grpc-listen off \
    --device emulated --policy "$policy" --gpus "$FUNCTIONS" --gpu-memory 4Gi --link-bandwidth 12GB/s \
    --snapshot-pool 2Gi --python "$PYTHON" >"$OUT/$policy/serve.out" 2>"$OUT/$policy/serve.log" &
  SERVER=$!
  URL="$(serve_url "$SERVER" "$OUT/$policy/serve.out" "$OUT/$policy/serve.log")" || exit 1
  ADMIN="$(cat "$DATA/data/admin.key")"
  if [ "$policy" = gshare ]; then
    # The tenants (made by the admin), each uploading its own files through the files API with its
    # own key (kept in the data directory for the second run).
    declare -A KEYS
    for tenant in $(cut -d' ' -f1 "$OUT/models/uploads.txt" | sort -u); do
      KEYS[$tenant]="$(curl -sS -X POST -H "Authorization: Bearer $ADMIN" \
        -d "{\"name\": \"$tenant\"}" "$URL/api/v1/tenants" |
        "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["key"])')"
    done
    while read -r tenant file name; do
      code="$(curl -sS -o "$OUT/upload.json" -w '%{http_code}' -X PUT --data-binary "@$file" \
        -H "Authorization: Bearer ${KEYS[$tenant]}" "$URL/api/v1/files/$name")"
      if [ "$code" != 201 ] && [ "$code" != 200 ]; then
        echo "uploading $name as $tenant: $code $(cat "$OUT/upload.json")" >&2
        exit 1
      fi
    done <"$OUT/models/uploads.txt"
    echo "the tenants uploaded $(wc -l <"$OUT/models/uploads.txt") files through the files API"
  fi
  echo
  echo "== live under $policy ($URL, log: $OUT/$policy/serve.log)"
  ./build/gshare replay --url "$URL" --catalog "$CATALOG" --trace "$OUT/workload/invocations.csv" \
    --admin-key-file "$DATA/data/admin.key" --references "$OUT/models/references" \
    --ready-timeout 3m --out "$OUT/$policy" 2>"$OUT/$policy/replay.log" |
    tee "$OUT/$policy/replay.out" | tail -n 3 || status=1
  [ -f "$OUT/$policy/summary.json" ] || status=1
  stop_server
  if [ "$SERVER_STATUS" -ne 0 ]; then
    echo "gshare serve ($policy) did not stop cleanly; its log is $OUT/$policy/serve.log" >&2
    status=1
  fi
done

echo
"$PYTHON" scripts/side-by-side.py "$OUT/gshare/summary.json" "$OUT/keepalive/summary.json" ||
  status=1
exit "$status"
