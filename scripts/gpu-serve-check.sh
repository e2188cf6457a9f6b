#!/usr/bin/env bash
# serve-check.sh: the serve phase of the GPU check (OUT/run.sh serve [--emulated], which
# scripts/gpu-bundle.sh copies in as OUT/serve-check.sh). gshare serve, from the bundle, serves
# tenants' own models as a user would run it: it starts on the machine's CUDA GPUs (--device cuda;
# --emulated: emulated GPUs and CPU PyTorch, where there is no GPU), the tenants get their keys
# from the admin and upload their TorchScript files and handler through the files API, and
# gshare replay deploys the functions, replays a generated trace with every answer checked
# against the model run alone (scripts/real-models.py, on the GPU in a process of its own), and
# predicts the same requests on the same node under gshare and keepalive. One table at the end:
# the live run beside both predictions, the driver's GPU memory before, during and after.
#
#   OUT/serve-check.sh [--emulated]     results in OUT/results-serve, or GSHARE_SERVE_RESULTS
#
# The models: resnet50, resnet18 (tenant vision-a), efficientnet_b0, mobilenet_v3_small and, on a
# GPU, vit_l_16 (vision-b), squeezenet1_1, shufflenet_v2_x1_0 and a Python handler (vision-c);
# random weights from a seed each, traced on this machine (no download). GSHARE_SERVE_DURATION
# (default 2m) and GSHARE_SERVE_RPS (default 6) shape the trace. Each step has a budget, printed
# as it starts (models 180 s, the server and uploads 60 s, twice where the sandbox cannot be made,
# the replay 270 s, the server's drain 30 s): with the default trace the phase fits one 10-minute
# call.
# The sandbox: tenants' runtimes run in it where the machine can make its namespaces; elsewhere
# (a machine without them, such as one under gVisor) the server is started again with --sandbox
# off, and the table says so.
#
# Exit status: 0 when every request was answered, none wrong and none with an error other than 504
# (its latest start passed: an SLO miss, which the table counts); 1 otherwise (a step that failed
# or ran out of its budget, saying which); 130 or 143 when interrupted (the server and its
# functions stopped, the data folder removed); 77 without
# an NVIDIA GPU or driver (and without --emulated); 2 on bad usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
emulated=0
case "${1:-}" in
  "") ;;
  --emulated) emulated=1 ;;
  *) echo "usage: $0 [--emulated]" >&2; exit 2 ;;
esac
duration="${GSHARE_SERVE_DURATION:-2m}"
rps="${GSHARE_SERVE_RPS:-6}"
results="${GSHARE_SERVE_RESULTS:-${here}/results-serve}"

if [ "${emulated}" -eq 0 ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1 ||
    ! timeout 30 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "serve-check.sh: no NVIDIA GPU or driver here: nothing to check (--emulated runs the" \
      "same phase on emulated GPUs)"
    exit 77
  fi
fi
py=""
for candidate in python3 /usr/bin/python3; do
  if command -v "${candidate}" >/dev/null &&
    "${candidate}" -c 'import torch, torchvision, numpy' 2>/dev/null; then
    py="$("${candidate}" -c 'import sys; print(sys.executable)')"
    break
  fi
done
if [ -z "${py}" ]; then
  echo "serve-check.sh: no python3 with torch, torchvision and numpy here" >&2
  exit 1
fi
if [ "${emulated}" -eq 0 ] && ! "${py}" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "serve-check.sh: ${py}'s PyTorch sees no CUDA GPU, which the models' references need" >&2
  exit 1
fi
# fail STEP: the step failed or ran out of its budget (its exit status, 124 for the budget).
fail() {
  echo "serve-check.sh: $1 failed (exit $2$([ "$2" -eq 124 ] && echo ": out of its budget"))" >&2
  exit 1
}

# A results folder of an earlier run is emptied; any other non-empty folder is left alone.
marker=".gshare-serve-results"
if [ -d "${results}" ] && [ ! -e "${results}/${marker}" ] &&
  [ -n "$(find "${results}" -mindepth 1 -maxdepth 1 -print -quit)" ]; then
  echo "serve-check.sh: ${results} holds files this script did not write; name another folder" >&2
  exit 1
fi
rm -rf "${results}"
mkdir -p "${results}"
touch "${results}/${marker}"
results="$(cd "${results}" && pwd)"
notes="${results}/notes.txt"
started=${SECONDS}
phase() {
  printf '== %s (budget %s s; %s s so far)\n' "$1" "$2" $((SECONDS - started))
}

# The server's data and the programs, where tenants' processes (their own uids, as root) can
# reach them: a fresh folder under /tmp.
data="$(mktemp -d /tmp/gshare-serve-check.XXXXXX)"
chmod 0711 "${data}"
server=""
sampler=""
server_status=0
stop_server() {
  if [ -n "${server}" ]; then
    # Collected even when it already ended: a server that crashed is reported.
    kill -TERM "${server}" 2>/dev/null || true
    wait "${server}" || server_status=$?
  fi
  server=""
}
stop_sampler() {
  if [ -n "${sampler}" ]; then
    kill "${sampler}" 2>/dev/null || true
    wait "${sampler}" 2>/dev/null || true
  fi
  sampler=""
}
trap 'stop_sampler; stop_server; rm -rf "${data}"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
mkdir -p "${data}/bin"
for program in gshare gshare-function gshare-init libgshare-fn.so libgshare-cuda-shim.so; do
  if [ -e "${here}/${program}" ]; then cp "${here}/${program}" "${data}/bin/"; fi
done
[ -d "${here}/lib" ] && cp -r "${here}/lib" "${data}/bin/lib"
cp -r "${here}/python" "${data}/bin/python"
chmod -R a+rX "${data}/bin"
gshare="${data}/bin/gshare"

if [ "${emulated}" -eq 1 ]; then
  device=(--device emulated --gpu-memory 4Gi --link-bandwidth 12GB/s)
  models=()
  pool=2Gi
  echo "device: emulated GPUs (--emulated), CPU PyTorch" >"${notes}"
else
  device=(--device cuda)
  models=(--device cuda --with-vit)
  pool=4Gi
  echo "device: $(timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)" >"${notes}"
fi
echo "python: ${py} ($("${py}" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)'))" >>"${notes}"

phase "the models, traced here, and their answers alone" 180
rc=0
timeout 180 "${py}" "${here}/real-models.py" --out "${results}/models" \
  --models-root "${data}/data/models" "${models[@]}" || rc=$?
[ "${rc}" -eq 0 ] || fail "making the models" "${rc}"
catalog="${results}/models/catalog.yaml"
functions="$(grep -c '^  - name:' "${catalog}")"
"${gshare}" workload --catalog "${catalog}" --duration "${duration}" --seed 1 --rps "${rps}" \
  --out "${results}/workload" >/dev/null || fail "gshare workload" $?
echo "trace: $(($(wc -l <"${results}/workload/invocations.csv") - 1)) requests over ${duration} to ${functions} functions" >>"${notes}"

# The driver's memory, sampled: before the server, every 2 s while it runs, after it stopped.
sample() {
  if [ "${emulated}" -eq 0 ]; then
    timeout 10 nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits |
      awk -v phase="$1" '{ total += $1 } END { print phase "," total }' >>"${results}/gpu-memory.csv" || true
  fi
}
sample before

start_server() {
  stop_server
  server_status=0
  "${gshare}" serve --data-dir "${data}/data" --listen 127.0.0.1:0 --grpc-listen off \
    "${device[@]}" --policy gshare --gpus "${functions}" --snapshot-pool "${pool}" --python "${py}" \
    "$@" >"${results}/serve.out" 2>"${results}/serve.log" &
  server=$!
  url=""
  for _ in $(seq 1 600); do
    url="$(sed -n 's/^listening on \(http:.*\)$/\1/p' "${results}/serve.out")"
    [ -n "${url}" ] && return 0
    if ! kill -0 "${server}" 2>/dev/null; then
      echo "serve-check.sh: gshare serve did not start; its log:" >&2
      tail -n 20 "${results}/serve.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "serve-check.sh: gshare serve did not listen within 60 s" >&2
  exit 1
}

phase "gshare serve, the tenants and their uploads" 60
start_server
admin="${data}/data/admin.key"
sandbox="$("${py}" "${here}/serve-check.py" node "${url}" "${admin}")" ||
  fail "GET /api/v1/node" $?
if [ "${sandbox}" = unavailable ]; then
  echo "sandbox: off (this machine cannot make its namespaces: --sandbox off)" >>"${notes}"
  start_server --sandbox off
else
  echo "sandbox: ${sandbox}" >>"${notes}"
fi
rc=0
timeout 60 "${py}" "${here}/serve-check.py" tenants "${url}" "${admin}" \
  "${results}/models/uploads.txt" | tee -a "${notes}" || rc=$?
[ "${rc}" -eq 0 ] || fail "the tenants and their uploads" "${rc}"

if [ "${emulated}" -eq 0 ]; then
  (while sleep 2; do sample during; done) &
  sampler=$!
fi
phase "gshare replay: deploy, ${duration} of requests, the predictions" 270
status=0
timeout 270 "${gshare}" replay --url "${url}" --catalog "${catalog}" \
  --trace "${results}/workload/invocations.csv" --admin-key-file "${admin}" \
  --references "${results}/models/references" --predict keepalive --ready-timeout 3m \
  --out "${results}/live" 2>"${results}/replay.log" | tee "${results}/replay.out" || replay_rc=$?
if [ "${replay_rc:-0}" -ne 0 ]; then
  status=1
  echo "serve-check.sh: gshare replay failed (exit ${replay_rc}$([ "${replay_rc}" -eq 124 ] && echo ": out of its 270 s budget"))" >&2
fi
"${py}" -c '
import sys, urllib.request
request = urllib.request.Request(sys.argv[1] + "/metrics",
                                 headers={"Authorization": "Bearer " + open(sys.argv[2]).read().strip()})
sys.stdout.write(urllib.request.urlopen(request, timeout=30).read().decode())' \
  "${url}" "${admin}" >"${results}/metrics.txt" || true
stop_sampler
stop_server
if [ "${server_status}" -ne 0 ]; then
  echo "serve-check.sh: gshare serve did not stop cleanly (exit ${server_status})" >&2
  status=1
fi
sample after
echo "phase time: $((SECONDS - started)) s" >>"${notes}"

echo
if [ ! -f "${results}/live/summary.json" ]; then
  echo "serve-check.sh: the replay wrote no summary; its log:" >&2
  tail -n 20 "${results}/replay.log" >&2
  exit 1
fi
"${py}" "${here}/serve-check.py" table "${results}" || status=1
exit "${status}"
