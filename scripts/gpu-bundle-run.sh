#!/usr/bin/env bash
# run.sh: the GPU check of a gShare bundle (made by scripts/gpu-bundle.sh in the source tree,
# which copies this file in as OUT/run.sh). For a machine with an NVIDIA GPU and driver, the CUDA
# toolkit, and Python 3 with PyTorch and torchvision; it needs nothing else and writes only under
# its results folder.
#
#   OUT/run.sh        results in OUT/results, or in the folder GSHARE_GPU_RESULTS names
#   OUT/run.sh serve [--emulated]
#                     the serve phase, a separate call (OUT/serve-check.sh: gshare serve on the
#                     GPU serving tenants' torchvision models; --emulated: on emulated GPUs with
#                     CPU PyTorch, where there is no GPU); results in OUT/results-serve
#
# Where there is no NVIDIA GPU or driver it says so and checks nothing. Otherwise, in this order
# (the key figures first; the whole run within 5 minutes, smoke phase included):
#   smoke phase (the first failure ends the run: the table of what there is, then exit 1):
#     gshare node info --device cuda --json                    shows a CUDA GPU
#     gshare bench function --mechanism shim --model resnet50 --slice 2Gi --repetitions 1
#       --ready-timeout 60 -- PYTHON3 examples/pytorch/function.py --model resnet50
#                                                              one shim round trip passes (90 s)
#     gshare bench restore --size 64Mi                         one copy benchmark measures
#   then:
#     gshare bench restore --size 512Mi --size 2Gi             engine against the best raw copy
#     gshare bench function --repetitions 3: shim vit_l_16 (--slice 4Gi), shim resnet50
#       (--slice 2Gi)
#     every test labelled gpu (tests/gpu-tests.txt), each with its gtest JSON report
#     gshare bench function --repetitions 3 through the driver's checkpoint (cuCheckpointProcess):
#       resnet50, then vit_l_16 (its calls take seconds each: last)
# GSHARE_GPU_BUDGET_S sets the whole run's budget in seconds (default 300).
# PYTHON3 is the absolute path of the interpreter python3 names here. Every command runs under
# `timeout`, for its cap or what is left of the budget if less; a step whose time left is under its
# minimum (10 s for a smoke node info or copy benchmark, 20 s for the restore benchmark, 30 s for a
# function or a test executable) is not started, and reads "not run (time budget spent)", which
# fails the verdict. Each step's standard output (JSON), its log and
# its exit status go to the results folder; report.py then prints one table of every figure and
# check, also written to summary.md there.
#
# Exit status: 0 when every supported check passed and the shim path passed; 1 otherwise; 77 when
# there is no NVIDIA GPU or driver here (nothing checked).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ "${1:-}" = serve ]; then
  shift
  exec bash "${here}/serve-check.sh" "$@"
fi
gshare="${here}/gshare"
function_py="${here}/examples/pytorch/function.py"
results="${GSHARE_GPU_RESULTS:-${here}/results}"
budget_s="${GSHARE_GPU_BUDGET_S:-300}" # the whole run (the issue's 5 minutes by default)
case "${budget_s}" in '' | *[!0-9]*) echo "run.sh: GSHARE_GPU_BUDGET_S must be whole seconds" >&2; exit 2 ;; esac
results_marker=".gshare-gpu-results"

no_gpu() {
  echo "run.sh: no NVIDIA GPU or driver here ($1): nothing to check"
  exit 77
}
if ! command -v nvidia-smi >/dev/null 2>&1; then
  no_gpu "nvidia-smi not found"
fi
if ! smi="$(timeout 30 nvidia-smi -L 2>&1)" || ! grep -q '^GPU ' <<<"${smi}"; then
  no_gpu "nvidia-smi -L: $(head -n 1 <<<"${smi}")"
fi
if command -v python3 >/dev/null 2>&1; then
  if ! why="$(python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>&1)"; then
    no_gpu "libcuda.so.1 cannot be loaded: $(tail -n 1 <<<"${why}")"
  fi
elif ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  no_gpu "libcuda.so.1 is not in the loader's cache"
fi
if ! py="$(command -v python3)"; then
  echo "run.sh: python3 is needed (the PyTorch function and the report); none found" >&2
  exit 1
fi
# The interpreter itself where python3 is a launcher (pyenv's shims): the function is started by
# this absolute path, not looked up again.
if real="$("${py}" -c 'import sys; print(sys.executable)' 2>/dev/null)" && [ -x "${real}" ]; then
  py="${real}"
fi

# A results folder of an earlier run is emptied; any other non-empty folder is left alone.
if [ -d "${results}" ] && [ ! -e "${results}/${results_marker}" ] &&
  [ -n "$(find "${results}" -mindepth 1 -maxdepth 1 -print -quit)" ]; then
  echo "run.sh: ${results} holds files this script did not write; name another folder" >&2
  exit 1
fi
rm -rf "${results}"
mkdir -p "${results}"
results="$(cd "${results}" && pwd)"
touch "${results}/${results_marker}"
echo "run.sh: results in ${results}"

started=${SECONDS}

# cap_for MIN_S CAP_S: the seconds a step may run: CAP_S, or what is left of the budget if less;
# 0 (the step is not run) when that is under MIN_S.
cap_for() {
  local min="$1" cap="$2"
  local left=$((budget_s - (SECONDS - started)))
  if [ "${left}" -lt "${cap}" ]; then cap="${left}"; fi
  if [ "${cap}" -lt "${min}" ]; then cap=0; fi
  echo "${cap}"
}

# run_step NAME CAP_S COMMAND...: runs COMMAND under timeout for CAP_S seconds (from cap_for);
# standard output to NAME.json (NAME.txt when step_output=txt), standard error to NAME.log, exit
# status to NAME.rc ("skipped" when CAP_S is 0: too little time was left). Returns the exit status.
run_step() {
  local name="$1" cap="$2"
  shift 2
  if [ "${cap}" -le 0 ]; then
    echo "skipped" >"${results}/${name}.rc"
    echo "not run: too little of the ${budget_s} s budget of run.sh was left" \
      >"${results}/${name}.log"
    printf 'run.sh: %-34s not run (time budget spent)\n' "${name}"
    return 1
  fi
  local begin=${SECONDS} rc=0
  timeout --kill-after=10 "${cap}" "$@" >"${results}/${name}.${step_output:-json}" \
    2>"${results}/${name}.log" || rc=$?
  echo "${rc}" >"${results}/${name}.rc"
  local note=""
  if [ "${rc}" -eq 124 ] || [ "${rc}" -eq 137 ]; then note=" (timed out after ${cap} s)"; fi
  printf 'run.sh: %-34s exit %3d  %4d s%s\n' "${name}" "${rc}" $((SECONDS - begin)) "${note}"
  return "${rc}"
}

# function_step NAME MECHANISM MODEL REPETITIONS MIN_S CAP_S: gshare bench function on the
# PyTorch example. The shim gets a slice sized for the model; the checkpoint API takes none. The
# function's readiness wait is 60 s, less where the step's cap is short, so that the command
# itself reports a slow start before timeout ends it.
function_step() {
  local name="$1" mechanism="$2" model="$3" repetitions="$4" cap
  cap="$(cap_for "$5" "$6")"
  local ready=$((cap - 30))
  if [ "${ready}" -gt 60 ]; then ready=60; fi
  if [ "${ready}" -lt 15 ]; then ready=15; fi
  local slice=()
  if [ "${mechanism}" = shim ]; then
    case "${model}" in
      vit_l_16) slice=(--slice 4Gi) ;;
      *) slice=(--slice 2Gi) ;;
    esac
  fi
  run_step "${name}" "${cap}" "${gshare}" bench function --device cuda --mechanism "${mechanism}" \
    --model "${model}" "${slice[@]}" --repetitions "${repetitions}" --ready-timeout "${ready}" \
    --json -- "${py}" "${function_py}" --model "${model}"
}

# The table of what there is (every later step reads "not run"), then exit 1.
smoke_failed() {
  local name="$1" what="$2"
  echo
  echo "run.sh: smoke phase failed: ${what}"
  echo "run.sh: the last lines of ${results}/${name}.log:"
  tail -n 20 "${results}/${name}.log" | sed 's/^/  /'
  echo "run.sh: nothing more was run"
  echo
  "${py}" "${here}/report.py" table "${results}" || true
  exit 1
}

# PyTorch's expandable segments allocate outside the shim's hooks, and the shim refuses them: the
# run measures PyTorch's default allocator, whatever this environment asks for.
for conf in PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF; do
  if [ -n "${!conf:-}" ]; then
    echo "run.sh: ${conf}=${!conf} is unset for this run (the default allocator is measured)"
    unset "${conf}"
  fi
done

echo "== machine"
torch_rc=0
torch_line="$(timeout 120 "${py}" -c 'import sys, torch, torchvision; print("python", sys.executable, sys.version.split()[0], "torch", torch.__version__, "torchvision", torchvision.__version__, "torch CUDA", torch.version.cuda)' 2>&1)" || torch_rc=$?
{
  timeout 30 nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv || true
  grep -m1 'model name' /proc/cpuinfo || true
  echo "CPUs: $(nproc)"
  head -n 2 /etc/os-release 2>/dev/null || true
  echo "C library: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown)"
  echo "${torch_line}"
  cat "${here}/BUILD-INFO" 2>/dev/null || true
} | tee "${results}/machine.txt"
if [ "${torch_rc}" -ne 0 ]; then
  echo "run.sh: ${py} cannot import torch and torchvision, which the PyTorch function needs" \
    "(exit ${torch_rc}): $(tail -n 1 <<<"${torch_line}")" >&2
  exit 1
fi

echo "== smoke phase"
run_step smoke-node-info "$(cap_for 10 20)" "${gshare}" node info --device cuda --json ||
  smoke_failed smoke-node-info "gshare node info --device cuda failed"
"${py}" "${here}/report.py" check node-info "${results}/smoke-node-info.json" ||
  smoke_failed smoke-node-info "gshare node info --device cuda shows no CUDA GPU"
function_step smoke-function-shim-resnet50 shim resnet50 1 30 90 ||
  smoke_failed smoke-function-shim-resnet50 "the shim round trip of resnet50 did not pass"
"${py}" "${here}/report.py" check function "${results}/smoke-function-shim-resnet50.json" ||
  smoke_failed smoke-function-shim-resnet50 "the shim round trip of resnet50 did not pass"
run_step smoke-restore-64Mi "$(cap_for 10 25)" "${gshare}" bench restore --device cuda \
  --size 64Mi --repetitions 11 --json ||
  smoke_failed smoke-restore-64Mi "gshare bench restore --size 64Mi failed"
"${py}" "${here}/report.py" check restore "${results}/smoke-restore-64Mi.json" ||
  smoke_failed smoke-restore-64Mi "gshare bench restore --size 64Mi measured nothing"
echo "run.sh: smoke phase passed in $((SECONDS - started)) s"

echo "== restore engine against raw copies"
run_step restore "$(cap_for 20 90)" "${gshare}" bench restore --device cuda --size 512Mi \
  --size 2Gi --json || true

echo "== PyTorch functions through the shim"
for model in vit_l_16 resnet50; do
  function_step "function-shim-${model}" shim "${model}" 3 30 90 || true
done

echo "== GPU tests"
# Before the checkpoint API's steps, whose driver calls take seconds each. Helpers a test starts
# lie beside it. Not brief: the standard output names each case before its skip message, which
# the report lists.
export PATH="${here}/tests:${PATH}"
while read -r test; do
  [ -n "${test}" ] || continue
  (cd "${here}/tests" && step_output=txt run_step "test-${test}" "$(cap_for 30 60)" \
    "./${test}" "--gtest_output=json:${results}/test-${test}.gtest.json") || true
done <"${here}/tests/gpu-tests.txt"

echo "== PyTorch functions through the driver's checkpoint API"
for model in resnet50 vit_l_16; do
  function_step "function-checkpoint-${model}" checkpoint "${model}" 3 30 90 || true
done
echo "run.sh: done in $((SECONDS - started)) s"

echo
"${py}" "${here}/report.py" table "${results}"
