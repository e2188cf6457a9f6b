#!/usr/bin/env bash
# gshare bench function end to end on emulated GPUs: the bundled mlp function as a real process,
# checkpointed and restored twice through the node's switch, its answers compared; the report's
# figures checked; and the errors: an unsupported mechanism (exit 4), bad usage (exit 2), a
# function that dies before it is ready (exit 1, the reason named).
# Usage: bench_function_test.sh GSHARE_BINARY
set -u
gshare="$1"
function_program="$(dirname "$gshare")/gshare-function"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
passed=0
check() {  # check NAME COMMAND...: the command succeeds
  local name="$1"
  shift
  if "$@"; then passed=$((passed + 1)); else echo "FAIL $name"; failed=$((failed + 1)); fi
}
expect_exit() {  # expect_exit NAME CODE TEXT COMMAND...: exits CODE and prints TEXT
  local name="$1" code="$2" text="$3"
  shift 3
  "$@" >"$work/out" 2>&1
  local rc=$?
  if [ "$rc" -eq "$code" ] && grep -q -- "$text" "$work/out"; then
    passed=$((passed + 1))
  else
    echo "FAIL $name: exit $rc (want $code), output:"
    cat "$work/out"
    failed=$((failed + 1))
  fi
}

"$gshare" examples weights --out "$work/weights" >/dev/null || { echo "FAIL weights"; exit 1; }
bench=("$gshare" bench function --device emulated --mechanism shim --model mlp
  --input-shape 1,1,28,28 --slice 256Mi)
"${bench[@]}" --repetitions 2 --json -- "$function_program" --model mlp \
  --weights "$work/weights/mlp.safetensors" >"$work/mlp.json" 2>"$work/mlp.stderr"
rc=$?
check mlp_exit [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || cat "$work/mlp.json" "$work/mlp.stderr"
check mlp_report python3 - "$work/mlp.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "pass" and r["why"] == "", r
assert r["function"] == "mlp" and r["mechanism"] == "shim" and r["device"].startswith("emulated")
assert r["rounds"] == 2 and r["outputs_identical"] is True, r
assert r["slice_bytes"] == 256 << 20, r
# The image in use holds the mlp's 23,298,088 bytes of weights, and fits the slice.
assert 23_298_088 <= r["allocated_bytes"] <= 256 << 20, r["allocated_bytes"]
assert r["checkpoint_ms"] > 0 and r["restore_ms"] > 0 and r["restore_gbps"] > 0, r
# The engine's copy is part of the restore, never more.
assert 0 < r["restore_copy_ms"] <= r["restore_ms"], r
assert r["slice_alloc_ms"] > 0, r
# Emulated GPUs: the slice's memory comes back whole after a checkpoint, and nothing stays.
assert r["freed_bytes"] == 256 << 20, r
assert r["free_after_checkpoint_bytes"] == r["free_before_start_bytes"], r
assert r["context_bytes"] == 0, r
PY

expect_exit checkpoint_unsupported 4 '"status": "unsupported"' \
  "$gshare" bench function --device emulated --mechanism checkpoint --model mlp --json -- \
  "$function_program" --model mlp
expect_exit bad_mechanism 2 "unknown switch mechanism" \
  "$gshare" bench function --device emulated --mechanism nope --model mlp -- /bin/true
expect_exit no_program 2 "program" "$gshare" bench function --device emulated --model mlp
expect_exit bad_shape 2 "input-shape" "${bench[@]}" --input-shape 1,,2 -- /bin/true
expect_exit dies_early 1 "exited before it was ready" "${bench[@]}" -- /bin/false
# A bare name is looked up on PATH (the child is started with execve).
expect_exit on_path 1 "exited before it was ready" "${bench[@]}" -- false
expect_exit not_on_path 2 "not a program on PATH" "${bench[@]}" -- no-such-program-here
expect_exit slice_with_checkpoint 2 "shim mechanism only" \
  "$gshare" bench function --device emulated --mechanism checkpoint --slice 1Gi --model mlp -- \
  /bin/true

# --device cuda where there is no NVIDIA GPU: the cause named, no fallback to emulated GPUs.
if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }; then
  expect_exit cuda_missing 1 "--device cuda: " \
    "$gshare" bench function --device cuda --model mlp --json -- /bin/true
fi

echo "bench function: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
