#!/usr/bin/env bash
# check-gpu-bundle.sh: the GPU bundle builds here and behaves where there is no GPU. Runs
# scripts/gpu-bundle.sh OUT BUILD_DIR, then checks that
#   1. OUT holds gshare, run.sh, report.py, the PyTorch example, and every test gpu-tests.txt
#      names, within 48 MiB (gpu-bundle.sh fails above it);
#   2. the bundle's binaries start from OUT: gshare lists emulated GPUs, each GPU test runs (and
#      skips its cases, where there is no GPU) and exits 0;
#   3. OUT/run.sh and OUT/run.sh serve exit 77 with their "no NVIDIA GPU or driver here" messages
#      (only where there is no GPU: where nvidia-smi answers, this check is left out); then
#      OUT/run.sh serve --emulated (a 30 s trace) serves the tenants' models with no wrong answer
#      and prints its table;
#   4. report.py reads results folders laid out as run.sh writes them (made up here, with the
#      fields of `gshare bench function`, `gshare bench restore` and gtest's reports) into the
#      tables and verdicts expected: a passing run; one whose checks fail (a shim restore beyond
#      its bound, a slice not freed, changed outputs, a checkpoint leaving 200 MiB, a test skipped
#      for want of a GPU node info found); the checkpoint API unsupported; a smoke phase that
#      failed; steps the time budget left out;
#   5. the example models' test passes in the bundle's tree, built without OpenBLAS.
#
#   scripts/check-gpu-bundle.sh OUT BUILD_DIR
#   scripts/check-gpu-bundle.sh --report-only     check 4 alone, on scripts/gpu-bundle-report.py
#                                                 (nothing is built)
#
# scripts/test.sh runs this as its bundle step (build-bundle/ beside build/, so that ccache reuses
# the default build's objects); ctest runs --report-only as gshare_gpu_bundle_report_test.
# Exit status: 0 when every check passes, 1 when one fails, 2 on bad usage.
set -uo pipefail

report_only=0
if [ $# -eq 1 ] && [ "$1" = --report-only ]; then
  report_only=1
elif [ $# -ne 2 ]; then
  echo "usage: $0 OUT BUILD_DIR | $0 --report-only" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

failed=0
fail() {
  echo "FAIL: $*"
  failed=$((failed + 1))
}
pass() { echo "ok: $*"; }

started=${SECONDS}
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# check_report REPORT_PY: check 4, report.py on made-up results folders.
check_report() {
  local report="$1" bundle results table
  echo "== 4. report.py on made-up results folders"
  # fixture SCENARIO: a bundle folder, ${work}/SCENARIO (bundle and results name it and its
  # results/), with REPORT_PY, tests/gpu-tests.txt and results/ as run.sh lays them out.
  fixture() {
    bundle="${work}/$1"
    mkdir -p "${bundle}/tests" "${bundle}/results"
    cp "${report}" "${bundle}/report.py"
    printf 'gpu_a_test\ngpu_b_test\n' >"${bundle}/tests/gpu-tests.txt"
    python3 - "${bundle}/results" "$1" <<'PY'
import json, os, sys
os.chdir(sys.argv[1])
scenario = sys.argv[2]
GIB, MIB = 2**30, 2**20
def step(name, data, rc=0):
    if data is not None:
        json.dump(data, open(f"{name}.json", "w"))
    open(f"{name}.rc", "w").write(f"{rc}\n")
    open(f"{name}.log", "w").write("log\n")
def not_run(name):
    open(f"{name}.rc", "w").write("skipped\n")
def size(size_bytes, raw, restore):
    return {"size_bytes": size_bytes, "raw_gbps": raw, "restore_gbps": restore,
            "ratio": restore / raw, "raw_method": "stream_x4",
            "raw_methods": {"memcpy": raw - 5, "stream_x4": raw},
            "d2h": {"raw_gbps": 50.0, "checkpoint_gbps": 49.0, "ratio": 0.98,
                    "raw_method": "stream", "raw_methods": {"stream": 50.0, "stream_x4": 49.0}}}
def function(model, mechanism, **changes):
    # The shim: the slice is the function's memory, freed whole; 500 MiB of context stays. The
    # checkpoint API: the driver takes what it checkpoints off the GPU; 40 MiB stays.
    shim = mechanism == "shim"
    slice_bytes = (4 * GIB if model == "vit_l_16" else 2 * GIB) if shim else 2 * MIB
    allocated = {("shim", "vit_l_16"): 1250 * 10**6, ("shim", "resnet50"): 110 * 10**6,
                 ("checkpoint", "vit_l_16"): 2500 * 10**6,
                 ("checkpoint", "resnet50"): 1500 * 10**6}[(mechanism, model)]
    freed = slice_bytes + 2 * MIB if shim else allocated
    context = 500 * MIB if shim else 40 * MIB
    before = 140 * GIB
    data = {"function": model, "mechanism": mechanism, "device": "cuda: GPU", "status": "pass",
            "why": "", "rounds": 3, "slice_bytes": slice_bytes, "allocated_bytes": allocated,
            "checkpoint_ms": 30.0, "restore_ms": 300.0, "restore_gbps": 5.0,
            "fast_swap_ms": 2.0 if shim else 0.0,
            "fast_swap_copied_bytes": 0,
            "free_before_start_bytes": before, "free_resident_bytes": before - context - freed,
            "free_after_checkpoint_bytes": before - context, "freed_bytes": freed,
            "context_bytes": context, "outputs_identical": True}
    if shim:  # bounds (best raw 50 GB/s at 2 GiB): vit_l_16 31.0 ms, resnet50 3.6 ms
        data["restore_ms"] = 28.0 if model == "vit_l_16" else 5.0
        data["restore_copy_ms"] = 26.5 if model == "vit_l_16" else 2.5
        data["slice_alloc_ms"] = 9.0 if model == "vit_l_16" else 4.0
    data.update(changes)
    return data
def gtest(test, cases, output):
    suites = {"testsuites": [{"name": "Suite", "testsuite": cases}]}
    json.dump(suites, open(f"test-{test}.gtest.json", "w"))
    open(f"test-{test}.txt", "w").write(output)
    open(f"test-{test}.rc", "w").write("0\n")
def printed(name, message):  # a skipped case as gtest 1.12 prints it (its JSON has no message)
    return (f"[ RUN      ] Suite.{name}\n/src/x_test.cc:20: Skipped\n{message}\n\n"
            f"[  SKIPPED ] Suite.{name} (0 ms)\n")
RUNS = {"name": "Runs", "status": "RUN", "result": "COMPLETED"}
def skipped(name, message=None):
    case = {"name": name, "status": "RUN", "result": "SKIPPED"}
    if message is not None:  # newer gtest: the message in the JSON report
        case["skipped"] = [{"message": f"/src/x_test.cc:20\n{message}\n"}]
    return case

step("smoke-node-info", {"backend": "cuda", "gpus": [{"index": 0, "kind": "cuda",
     "name": "GPU", "memory_bytes": 2**37, "measured_link_bytes_per_second": 5e10}]})
if scenario == "smoke-failed":
    step("smoke-function-shim-resnet50",
         function("resnet50", "shim", status="fail", why="the function never answered ready"), 1)
    sys.exit(0)
step("smoke-function-shim-resnet50", function("resnet50", "shim", rounds=1))
step("smoke-restore-64Mi", {"results": [size(64 * MIB, 30.0, 29.0)]})
step("restore", {"results": [size(2 * GIB, 50.0, 48.0), size(512 * MIB, 40.0, 39.0)]})
for mechanism, model in (("shim", "vit_l_16"), ("shim", "resnet50"), ("checkpoint", "resnet50"),
                         ("checkpoint", "vit_l_16")):
    step(f"function-{mechanism}-{model}", function(model, mechanism))
gtest("gpu_a_test", [RUNS, skipped("OntoAnotherGpu", "not exercised: it needs a second GPU")],
      "[ RUN      ] Suite.Runs\n[       OK ] Suite.Runs (5 ms)\n")
no_api = ("process checkpoint API unsupported: the NVIDIA driver (CUDA 12.4) lacks the process "
          "checkpoint API (cuCheckpointProcessLock not found): it needs driver R570 or later")
gtest("gpu_b_test", [RUNS, skipped("Exports"), skipped("Checkpoints")],
      printed("Exports", "GPU 0 cannot export memory: no | fabric") +
      printed("Checkpoints", no_api))

if scenario == "failing":
    step("function-shim-vit_l_16",  # beyond the bound; 3.5 GiB of the 4 GiB slice freed
         function("vit_l_16", "shim", restore_ms=40.0, freed_bytes=3584 * MIB))
    step("function-shim-resnet50",  # changed outputs; an image smaller than the weights
         function("resnet50", "shim", outputs_identical=False, allocated_bytes=20 * MIB))
    step("function-checkpoint-vit_l_16",  # 200 MiB left on the GPU
         function("vit_l_16", "checkpoint", context_bytes=200 * MIB))
    gtest("gpu_b_test", [RUNS, skipped("Exports")],
          printed("Exports", "no CUDA GPU here: cudaErrorNoDevice: no CUDA-capable device"))
elif scenario == "unsupported":
    for model in ("resnet50", "vit_l_16"):
        step(f"function-checkpoint-{model}", function(model, "checkpoint", status="unsupported",
                                                      why="no cuCheckpointProcess here"), 4)
elif scenario == "budget":
    for name in ("restore", "function-checkpoint-vit_l_16", "test-gpu_b_test"):
        for suffix in (".json", ".gtest.json", ".txt"):
            if os.path.exists(name + suffix):
                os.remove(name + suffix)
        not_run(name)
PY
    results="${bundle}/results"
  }
  # has TEXT...: every TEXT is a line of ${table} (fixed strings).
  has() {
    local line
    for line in "$@"; do
      if ! grep -qxF -- "${line}" "${table}"; then
        echo "  missing: ${line}"
        return 1
      fi
    done
  }
  table="${work}/table.md"

  fixture passing
  if python3 "${bundle}/report.py" table "${results}" >"${table}" &&
    has '| smoke: resnet50 through the shim, 1 round | status pass; restore 5.0 ms, outputs identical true | pass | pass |' \
      '| restore engine, 2 GiB | 48.00 GB/s, ratio 0.960 | ratio >= 0.90 | pass |' \
      '| vit_l_16, shim: restore within bound | 28.0 ms vs bound 31.0 ms | <= 1.2 x allocated / best raw (2 GiB) + 1 ms | pass |' \
      '| vit_l_16, shim: of the restore, moving bytes (median) | 26.5 ms | - | - |' \
      '| vit_l_16, shim: handing out the slice before a restore (median) | 9.0 ms | - | - |' \
      '| resnet50, shim: restore against the bound (reported) | 5.0 ms vs bound 3.6 ms | - | - |' \
      '| vit_l_16, shim: GPU memory freed after checkpoint (driver) | 4297064448 (4.00 GiB) of the 4294967296 (4.00 GiB) slice | >= the slice | pass |' \
      '| vit_l_16, shim: left on the GPU (context) | 524288000 (500.0 MiB) | - | - |' \
      '| resnet50, checkpoint: GPU memory freed after checkpoint (driver) | 1500000000 (1.40 GiB) | - | - |' \
      '| resnet50, checkpoint: left on the GPU (context) | 41943040 (40.0 MiB) beyond before the function started | <= 64 MiB | pass |' \
      '| GPU tests (2 executables) | 2/5 passed, 3 skipped, 0 failed | all pass | pass |' \
      '| GPU test: gpu_a_test Suite.OntoAnotherGpu | skipped | - | unsupported (not exercised: it needs a second GPU) |' \
      '| GPU test: gpu_b_test Suite.Exports | skipped | - | unsupported (GPU 0 cannot export memory: no \| fabric) |' \
      '| GPU test: gpu_b_test Suite.Checkpoints | skipped | - | unsupported (process checkpoint API unsupported: the NVIDIA driver (CUDA 12.4) lacks the process checkpoint API (cuCheckpointProcessLock not found): it needs driver R570 or later) |' &&
    ! grep -q '^| [a-z_0-9]*, checkpoint: restore ' "${table}" &&
    grep -q '^GPU check: pass' "${table}" && cmp -s "${table}" "${results}/summary.md"; then
    pass "a passing run reads pass (shim: slice freed, context a figure, the bound checked for vit_l_16 only; checkpoint: 40 MiB left, no bound; skips for a second GPU, export and the checkpoint API unsupported)"
  else
    cat "${table}"
    fail "report.py's table of a passing run is not the one expected"
  fi

  fixture failing
  if python3 "${bundle}/report.py" table "${results}" >"${table}"; then
    cat "${table}"
    fail "report.py passes a run whose checks failed"
  elif has '| vit_l_16, shim: restore within bound | 40.0 ms vs bound 31.0 ms | <= 1.2 x allocated / best raw (2 GiB) + 1 ms | fail |' \
    '| vit_l_16, shim: GPU memory freed after checkpoint (driver) | 3758096384 (3.50 GiB) of the 4294967296 (4.00 GiB) slice | >= the slice | fail |' \
    '| resnet50, shim: outputs identical after restore | false | true | fail |' \
    '| resnet50, shim: allocated (the image the shim moved) | 20971520 (20.0 MiB) | >= the weights, 102228128 (97.5 MiB) | fail |' \
    '| vit_l_16, checkpoint: left on the GPU (context) | 209715200 (200.0 MiB) beyond before the function started | <= 64 MiB | fail |' \
    '| GPU tests (2 executables) | 2/4 passed, 2 skipped, 0 failed, 1 skipped finding no GPU or driver | all pass | fail |' \
    '| GPU test: gpu_b_test Suite.Exports | skipped | - | fail (no GPU or driver found, yet node info lists a CUDA GPU: no CUDA GPU here: cudaErrorNoDevice: no CUDA-capable device) |' &&
    grep -q '^GPU check: fail (7 check(s) failed or not run; shim path passed)' "${table}"; then
    pass "a restore beyond the bound, a slice not freed, changed outputs, an image smaller than the weights, 200 MiB left by a checkpoint and a skip for want of a GPU read fail, exit 1"
  else
    cat "${table}"
    fail "report.py's failing rows are not the ones expected"
  fi

  fixture unsupported
  if python3 "${bundle}/report.py" table "${results}" >"${table}" &&
    has '| resnet50, checkpoint: bench function | - | pass | unsupported (no cuCheckpointProcess here) |' \
      '| vit_l_16, checkpoint: bench function | - | pass | unsupported (no cuCheckpointProcess here) |' &&
    grep -q '^GPU check: pass' "${table}"; then
    pass "a passing run with the checkpoint API unsupported reads pass"
  else
    cat "${table}"
    fail "report.py does not read an unsupported checkpoint API as expected"
  fi

  fixture smoke-failed
  if python3 "${bundle}/report.py" table "${results}" >"${table}"; then
    cat "${table}"
    fail "report.py passes a run whose smoke phase failed"
  elif has '| smoke: resnet50 through the shim, 1 round | status fail: the function never answered ready; restore 5.0 ms, outputs identical true | pass | fail |' \
    '| smoke: restore 64 MiB | - | measures | not run (the smoke phase stopped the run) |' \
    '| vit_l_16, shim: bench function | - | pass | not run (the smoke phase stopped the run) |' \
    '| GPU tests (2 executables) | 0/0 passed, 0 skipped, 0 failed, 2 executable(s) not run | all pass | not run (the smoke phase stopped the run) |' &&
    grep -q '^GPU check: fail' "${table}" && cmp -s "${table}" "${results}/summary.md"; then
    pass "a failed smoke phase gives the table (summary.md too), the later steps not run, exit 1"
  else
    cat "${table}"
    fail "report.py's table of a failed smoke phase is not the one expected"
  fi

  fixture budget
  if python3 "${bundle}/report.py" table "${results}" >"${table}"; then
    cat "${table}"
    fail "report.py passes a run with steps not run"
  elif has '| restore benchmark (512 MiB, 2 GiB) | - | - | not run (time budget spent) |' \
    '| vit_l_16, shim: restore within bound | 28.0 ms | <= 1.2 x allocated / best raw (2 GiB) + 1 ms | fail (no 2 GiB raw bandwidth measured) |' \
    '| vit_l_16, checkpoint: bench function | - | pass | not run (time budget spent) |' \
    '| GPU tests (2 executables) | 1/2 passed, 1 skipped, 0 failed, 1 executable(s) not run | all pass | not run (time budget spent) |' &&
    grep -q '^GPU check: fail (4 check(s) failed or not run; shim path passed)' "${table}"; then
    pass "steps the time budget left out read not run and fail the verdict"
  else
    cat "${table}"
    fail "report.py's rows of steps not run are not the ones expected"
  fi
}

if [ "${report_only}" -eq 1 ]; then
  check_report "${root}/scripts/gpu-bundle-report.py"
  if [ "${failed}" -ne 0 ]; then
    echo "check-gpu-bundle: ${failed} check(s) failed"
    exit 1
  fi
  echo "check-gpu-bundle: every report check passed"
  exit 0
fi
out="$1"
build="$2"
if ! bash "${root}/scripts/gpu-bundle.sh" "${out}" "${build}"; then
  echo "FAIL: scripts/gpu-bundle.sh failed"
  exit 1
fi
echo "== the bundle took $((SECONDS - started)) s to build here"

echo "== 1. contents and size"
for file in gshare run.sh report.py examples/pytorch/function.py examples/pytorch/kserve_unix.py \
  tests/gpu-tests.txt BUILD-INFO gshare-init gshare-function libgshare-fn.so \
  python/gshare_runtime/pytorch_function.py python/gshare_runtime/python_function.py \
  real-models.py serve-check.sh serve-check.py; do
  if [ -f "${out}/${file}" ]; then pass "${file}"; else fail "${file} is missing"; fi
done
mapfile -t tests <"${out}/tests/gpu-tests.txt"
if [ ${#tests[@]} -eq 0 ]; then fail "tests/gpu-tests.txt lists no test"; fi
for test in "${tests[@]}"; do
  if [ -x "${out}/tests/${test}" ]; then pass "tests/${test}"; else fail "tests/${test} missing"; fi
done
total="$(du -sb "${out}" | cut -f1)"
if [ "${total}" -le $((48 * 1024 * 1024)) ]; then
  pass "${total} bytes, within 48 MiB"
else
  fail "${total} bytes, above 48 MiB"
fi

echo "== 2. the binaries start from the bundle"
if "${out}/gshare" node info --device emulated --no-measure --json >"${work}/info.json" 2>&1 &&
  grep -q '"kind": "emulated"' "${work}/info.json"; then
  pass "gshare node info --device emulated"
else
  fail "gshare node info --device emulated: $(head -c 500 "${work}/info.json")"
fi
for test in "${tests[@]}"; do
  if (cd "${out}/tests" && timeout 300 "./${test}" --gtest_brief=1) >"${work}/${test}.log" 2>&1; then
    pass "${test} exits 0 ($(grep -c 'SKIPPED' "${work}/${test}.log" || true) skip lines)"
  else
    tail -n 20 "${work}/${test}.log"
    fail "${test} failed"
  fi
done

echo "== 3. run.sh where there is no GPU"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "skipped: this machine has an NVIDIA GPU (run ${out}/run.sh to check it)"
else
  "${out}/run.sh" >"${work}/run.out" 2>&1
  rc=$?
  message="$(cat "${work}/run.out")"
  if [ "${rc}" -eq 77 ] && grep -q '^run.sh: no NVIDIA GPU or driver here (.*): nothing to check$' \
    <<<"${message}"; then
    pass "run.sh exits 77: ${message}"
  else
    fail "run.sh exited ${rc}, expected 77 and its message: ${message}"
  fi
  if [ -e "${out}/results" ]; then fail "run.sh wrote ${out}/results without a GPU"; fi
  "${out}/run.sh" serve >"${work}/serve.out" 2>&1
  rc=$?
  if [ "${rc}" -eq 77 ] && grep -q 'no NVIDIA GPU or driver here' "${work}/serve.out"; then
    pass "run.sh serve exits 77 without a GPU"
  else
    fail "run.sh serve exited ${rc}, expected 77: $(head -c 500 "${work}/serve.out")"
  fi
fi

echo "== 3b. the serve phase on emulated GPUs (run.sh serve --emulated, a 30 s trace)"
# gshare serve from the bundle serves the tenants' torchvision models on CPU PyTorch: every answer
# equals the model's alone, the table has the live run beside both predictions.
GSHARE_SERVE_DURATION=30s GSHARE_SERVE_RESULTS="${work}/serve" timeout 900 \
  "${out}/run.sh" serve --emulated >"${work}/serve-emulated.out" 2>&1
rc=$?
if [ "${rc}" -eq 0 ] && grep -q '^verdict: pass' "${work}/serve-emulated.out" &&
  grep -q '^| wrong outputs | 0 |' "${work}/serve-emulated.out" &&
  grep -q '^| | live gshare | sim gshare | sim keepalive |$' "${work}/serve-emulated.out"; then
  pass "run.sh serve --emulated: $(grep '^verdict:' "${work}/serve-emulated.out")"
else
  tail -n 40 "${work}/serve-emulated.out"
  fail "run.sh serve --emulated exited ${rc}"
fi

check_report "${out}/report.py"

echo "== 5. the example models' forward pass without OpenBLAS (the bundle's configuration)"
# The bundle's tree is configured with GSHARE_WITH_OPENBLAS=OFF: its plain loops must give what the
# reference gives, within the comparison's tolerance, as the OpenBLAS build's do.
if cmake --build "${build}" --target gshare_example_models_test >"${work}/models.log" 2>&1 &&
  models_test="$(find "${build}" -name gshare_example_models_test -type f -perm -u+x | head -n 1)" &&
  [ -n "${models_test}" ] && "${models_test}" --gtest_brief=1 >>"${work}/models.log" 2>&1; then
  pass "gshare_example_models_test passes without OpenBLAS"
else
  fail "gshare_example_models_test without OpenBLAS: $(tail -n 20 "${work}/models.log")"
fi

if [ "${failed}" -ne 0 ]; then
  echo "check-gpu-bundle: ${failed} check(s) failed"
  exit 1
fi
echo "check-gpu-bundle: every check passed ($((SECONDS - started)) s)"
