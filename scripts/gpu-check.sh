#!/usr/bin/env bash
# gpu-check.sh: builds gshare with CUDA, runs the GPU tests and the restore benchmark, and prints a
# summary table. For a machine with an NVIDIA GPU and driver; on any other machine the GPU tests
# skip and the script says so.
#
#   scripts/gpu-check.sh [BUILD_DIR]      (default: build-gpu; GSHARE_JOBS sets the build jobs)
#
# Exit status: 0 when the build, the GPU tests and the benchmarks succeed; 1 otherwise; 2 when no
# GPU was visible (the tests skipped).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${root}/build-gpu}"
jobs="${GSHARE_JOBS:-$(nproc)}"
out="${build}/gpu-check"
mkdir -p "${out}"

echo "== machine"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max \
    --format=csv || true
else
  echo "nvidia-smi not found"
fi
grep -m1 'model name' /proc/cpuinfo || true
echo "CPUs: $(nproc)"

echo "== build (CUDA on)"
cmake -S "${root}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGSHARE_ENABLE_CUDA=ON
cmake --build "${build}" -j "${jobs}" --target gshare gshare_device_test gshare_device_cuda_test \
  gshare_node_test gshare_node_gpu_test

echo "== tests (device and node, GPU label included)"
tests_failed=0
# ctest names tests Suite.Case: these are the suites of src/gshare/device and src/gshare/node.
suites='^(CopyEngine|EmulatedDevice|EmulatedHostMemory|DeviceRegistry|CudaDevice|GpuInventory|SnapshotStore|SnapshotStoreCreate|RestoreEngine|RestoreEngineFault|RestoreEngineGpu|VGpuManager)Test[.]'
ctest --test-dir "${build}" -R "${suites}" --output-on-failure \
  -j "${jobs}" 2>&1 | tee "${out}/ctest-all.log" || tests_failed=1
ctest --test-dir "${build}" -L gpu --output-on-failure -V 2>&1 | tee "${out}/ctest-gpu.log" ||
  tests_failed=1
gpu_tests=$(grep -c '\[       OK \]' "${out}/ctest-gpu.log" || true)
gpu_skipped=$(grep -c '\[  SKIPPED \] .*(' "${out}/ctest-gpu.log" || true)
if [[ "${gpu_skipped}" -gt 0 || "${gpu_tests}" -eq 0 ]]; then
  echo "GPU tests skipped: no CUDA GPU was visible; nothing to benchmark" >&2
  exit 2
fi

echo "== gshare node info"
"${build}/gshare" node info --device cuda | tee "${out}/node-info.txt"
"${build}/gshare" node info --device cuda --json > "${out}/node-info.json"

echo "== gshare bench restore"
"${build}/gshare" bench restore --device cuda | tee "${out}/bench-restore.txt"
"${build}/gshare" bench restore --device cuda --json > "${out}/bench-restore.json"
"${build}/gshare" bench restore --device cuda --size 100M --json > "${out}/bench-restore-100M.json"

echo
echo "== summary"
python3 - "${out}" "${gpu_tests}" "${gpu_skipped}" <<'PY'
import json, sys
out, passed, skipped = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
info = json.load(open(f"{out}/node-info.json"))
print(f"GPU tests: {passed} passed, {skipped} skipped (see ctest-gpu.log for failures)")
print(f"CUDA driver {info['cuda_driver_version']}, runtime {info['cuda_runtime_version']}")
print(f"{'GPU':>3}  {'NAME':<28} {'MEMORY GiB':>10}  {'TOTAL GiB':>9}  {'EXPORT':<8}  "
      f"{'LINK GB/s':>9}  UUID")
for g in info["gpus"]:
    print(f"{g['index']:>3}  {g['name']:<28} {g['memory_bytes'] / 2**30:>10.1f}  "
          f"{g['total_memory_bytes'] / 2**30:>9.1f}  {g['memory_export']:<8}  "
          f"{g['measured_link_bytes_per_second'] / 1e9:>9.2f}  {g['uuid']}")
print()
rows = json.load(open(f"{out}/bench-restore.json"))["results"]
rows += json.load(open(f"{out}/bench-restore-100M.json"))["results"]
print(f"{'SIZE':>12}  {'RAW GB/s':>9}  {'RESTORE GB/s':>12}  {'RATIO':>6}  {'TIME/RAW':>8}  "
      f"{'D2H RAW':>8}  {'CKPT GB/s':>9}  {'D2H RATIO':>9}  TARGET")
for r in rows:
    time_over_raw = 1 / r["ratio"]
    if r["size_bytes"] == 100_000_000:
        target, ok = "time <= 1.15 x raw", time_over_raw <= 1.15
    elif r["size_bytes"] >= 512 * 2**20:
        target, ok = "ratio >= 0.85", r["ratio"] >= 0.85
    else:
        target, ok = "-", True
    d = r["d2h"]
    print(f"{r['size_bytes']:>12}  {r['raw_gbps']:>9.2f}  {r['restore_gbps']:>12.2f}  "
          f"{r['ratio']:>6.3f}  {time_over_raw:>8.3f}  {d['raw_gbps']:>8.2f}  "
          f"{d['checkpoint_gbps']:>9.2f}  {d['ratio']:>9.3f}  {target} {'ok' if ok else 'MISSED'}")
PY

if [[ "${tests_failed}" -ne 0 ]]; then
  echo "some tests failed: see ${out}/ctest-all.log and ${out}/ctest-gpu.log" >&2
  exit 1
fi
