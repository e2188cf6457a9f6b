#!/usr/bin/env bash
# gshare bench runtime end to end: a small TorchScript model (scripted here, in a Python with
# PyTorch) through the pytorch runtime on an emulated GPU against the same model in-process; the
# report's figures checked; and the errors: bad usage (exit 2), a file that is not TorchScript
# (exit 1, the loader's reason named). Skips, saying so, where no Python has PyTorch.
# Usage: bench_runtime_test.sh GSHARE_BINARY PYTHON_WITH_TORCH
set -u
gshare="$1"
python="${2:-}"
source "$(dirname "$0")/shell_test.sh"
if [ -z "$python" ]; then
  echo "bench runtime: skipped (no Python with PyTorch; scripts/setup.sh installs python3-torch)"
  finish
  exit 0
fi

run make_model "$python" - "$work" <<'PY' || { finish; exit 1; }
import sys, torch
torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
torch.jit.script(net.eval()).save(sys.argv[1] + "/net.pt")
PY
bench=("$gshare" bench runtime --python "$python" --input-shape 2,32 --output-shape 2,10)
run net "${bench[@]}" --model-file "$work/net.pt" --requests 20 --repetitions 3 --json &&
  check net_report python3 - "$work/net.stdout" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "pass" and r["why"] == "", r
assert r["requests"] == 20 and r["rounds"] == 3 and r["outputs_identical"] is True, r
# The parameters (32x64 + 64 + 64x10 + 10 FP32 = 11,240 bytes, each placed 256-aligned) are in
# device memory, and a restore moves them.
assert 11_240 <= r["device_bytes"] <= 16_384, r["device_bytes"]
for key in ("in_process_p50_ms", "in_process_p90_ms", "function_p50_ms", "function_p90_ms",
            "restore_ms", "restore_bound_ms", "after_restore_ms"):
    assert r[key] > 0, (key, r)
assert r["in_process_p50_ms"] <= r["in_process_p90_ms"], r
assert r["function_p50_ms"] <= r["function_p90_ms"], r
assert abs(r["overhead_p50_ms"] - (r["function_p50_ms"] - r["in_process_p50_ms"])) < 1e-6, r
# The slice the live node would give a spec for this model: 1.25 x the file + 32 MiB, in the
# node's 128 MiB steps; restores into slices the GPU's preparer made ahead are counted.
import os
size = os.path.getsize(os.path.join(os.path.dirname(sys.argv[1]), "net.pt"))
want = (size * 5 // 4 // (1 << 20) + 32) << 20
assert r["slice_bytes"] == (want + (128 << 20) - 1) // (128 << 20) * (128 << 20), r
assert 0 <= r["prepared_restores"] <= r["rounds"], r
PY

printf 'not a model' >"$work/junk.pt"
expect junk 1 "not a TorchScript model" "${bench[@]}" --model-file "$work/junk.pt" --requests 2 \
  --repetitions 1
expect no_file 2 "is not a file" "${bench[@]}" --model-file "$work/none.pt"
expect batch_mismatch 2 "the same in both" "$gshare" bench runtime --python "$python" \
  --model-file "$work/net.pt" --input-shape 2,32 --output-shape 3,10
expect no_python 2 "not a program on PATH" "$gshare" bench runtime --python no-such-python \
  --model-file "$work/net.pt" --input-shape 2,32 --output-shape 2,10

echo -n "bench runtime: "
finish
