#!/usr/bin/env bash
# check-gpu-bundle.sh: the GPU bundle builds here and behaves where there is no GPU. Runs
# scripts/gpu-bundle.sh OUT BUILD_DIR, then checks that
#   1. OUT holds gshare, run.sh, report.py, the PyTorch example, and every test gpu-tests.txt
#      names, within 48 MiB (gpu-bundle.sh fails above it);
#   2. the bundle's binaries start from OUT: gshare lists emulated GPUs, each GPU test runs (and
#      skips its cases, where there is no GPU) and exits 0;
#   3. OUT/run.sh exits 77 with its "no NVIDIA GPU or driver here" message (only where there is no
#      GPU: where nvidia-smi answers, this check is left out);
#   4. report.py reads a results folder laid out as run.sh writes it (made up here, with the
#      fields of `gshare bench function` and `gshare bench restore`) into the table and verdict
#      expected.
#
#   scripts/check-gpu-bundle.sh OUT BUILD_DIR
#
# ctest runs this as gshare_gpu_bundle_test (label build). Exit status: 0 when every check passes,
# 1 when one fails, 2 on bad usage.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 OUT BUILD_DIR" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$1"
build="$2"

failed=0
fail() {
  echo "FAIL: $*"
  failed=$((failed + 1))
}
pass() { echo "ok: $*"; }

started=${SECONDS}
if ! bash "${root}/scripts/gpu-bundle.sh" "${out}" "${build}"; then
  echo "FAIL: scripts/gpu-bundle.sh failed"
  exit 1
fi
echo "== the bundle took $((SECONDS - started)) s to build here"

echo "== 1. contents and size"
for file in gshare run.sh report.py examples/pytorch/function.py examples/pytorch/kserve_unix.py \
  tests/gpu-tests.txt BUILD-INFO; do
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
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
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
fi

echo "== 4. report.py on a made-up results folder"
mkdir -p "${work}/bundle/tests" "${work}/bundle/results"
cp "${out}/report.py" "${work}/bundle/"
printf 'gpu_a_test\ngpu_b_test\n' >"${work}/bundle/tests/gpu-tests.txt"
python3 - "${work}/bundle/results" <<'PY'
import json, os, sys
os.chdir(sys.argv[1])
def step(name, data, rc=0):
    if data is not None:
        json.dump(data, open(f"{name}.json", "w"))
    open(f"{name}.rc", "w").write(f"{rc}\n")
    open(f"{name}.log", "w").write("log\n")
def sizes(raw, restore):
    return {"size_bytes": 2 * 2**30, "raw_gbps": raw, "restore_gbps": restore,
            "ratio": restore / raw, "raw_method": "stream_x4",
            "raw_methods": {"memcpy": raw - 5, "stream_x4": raw},
            "d2h": {"raw_gbps": 50.0, "checkpoint_gbps": 49.0, "ratio": 0.98,
                    "raw_method": "stream", "raw_methods": {"stream": 50.0, "stream_x4": 49.0}}}
step("smoke-node-info", {"backend": "cuda", "gpus": [{"index": 0, "kind": "cuda",
     "name": "GPU", "memory_bytes": 2**37, "measured_link_bytes_per_second": 5e10}]})
step("restore", {"results": [sizes(50.0, 48.0)]})
for test in ("gpu_a_test", "gpu_b_test"):
    json.dump({"testsuites": [{"name": "Suite", "testsuite": [
        {"name": "Runs", "status": "RUN", "result": "COMPLETED"},
        {"name": "Skips", "status": "RUN", "result": "SKIPPED"}]}]},
        open(f"test-{test}.gtest.json", "w"))
    open(f"test-{test}.rc", "w").write("0\n")
def function(model, mechanism, status="pass", why=""):
    return {"function": model, "mechanism": mechanism, "device": "cuda: GPU", "status": status,
            "why": why, "allocated_bytes": 10**9, "checkpoint_ms": 30.0, "restore_ms": 20.0,
            "restore_gbps": 50.0, "free_before_start_bytes": 3 * 10**9,
            "free_resident_bytes": 2 * 10**9, "free_after_checkpoint_bytes": 3 * 10**9,
            "freed_bytes": 10**9, "context_bytes": 5 * 10**8, "outputs_identical": True}
for model in ("resnet50", "vit_l_16"):
    step(f"function-shim-{model}", function(model, "shim"))
    step(f"function-checkpoint-{model}",
         function(model, "checkpoint", "unsupported", "no cuCheckpointProcess here"), 4)
PY
if python3 "${work}/bundle/report.py" table "${work}/bundle/results" >"${work}/table.md"; then
  if grep -q '| GPU tests (2 executables) | 2/4 passed, 2 skipped, 0 failed | all pass | pass |' \
    "${work}/table.md" &&
    grep -q '| restore engine, 2 GiB | 48.00 GB/s, ratio 0.960 | ratio >= 0.90 | pass |' \
      "${work}/table.md" &&
    grep -q '| vit_l_16, shim: restore within bound | 20.0 ms vs bound 25.0 ms |' "${work}/table.md" &&
    grep -q '| resnet50, checkpoint: bench function | - | pass | unsupported (no cuCheckpointProcess here) |' \
      "${work}/table.md" &&
    grep -q '^GPU check: pass' "${work}/table.md"; then
    pass "a passing run with the checkpoint API unsupported reads pass"
  else
    cat "${work}/table.md"
    fail "report.py's table is not the one expected"
  fi
else
  cat "${work}/table.md"
  fail "report.py fails a passing run"
fi
# The same run with restores beyond the bound and outputs that changed: exit 1, both rows fail.
python3 - "${work}/bundle/results/function-shim-resnet50.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
data.update(restore_ms=40.0, outputs_identical=False)
json.dump(data, open(sys.argv[1], "w"))
PY
if python3 "${work}/bundle/report.py" table "${work}/bundle/results" >"${work}/table.md"; then
  fail "report.py passes a run whose shim restore broke its bound"
elif grep -q '| resnet50, shim: restore within bound | 40.0 ms vs bound 25.0 ms | .* | fail |' \
  "${work}/table.md" &&
  grep -q '| resnet50, shim: outputs identical after restore | false | true | fail |' \
    "${work}/table.md"; then
  pass "a restore beyond the bound and changed outputs read fail, exit 1"
else
  cat "${work}/table.md"
  fail "report.py's failing rows are not the ones expected"
fi

if [ "${failed}" -ne 0 ]; then
  echo "check-gpu-bundle: ${failed} check(s) failed"
  exit 1
fi
echo "check-gpu-bundle: every check passed ($((SECONDS - started)) s)"
