#!/usr/bin/env bash
# gshare bench function end to end on emulated GPUs: the bundled mlp function as a real process,
# checkpointed and restored twice through the node's switch, its answers compared; the report's
# figures checked; and the errors: an unsupported mechanism (exit 4), bad usage (exit 2), a
# function that dies before it is ready (exit 1, the reason named).
# Usage: bench_function_test.sh GSHARE_BINARY
set -u
gshare="$1"
function_program="$(dirname "$gshare")/gshare-function"
source "$(dirname "$0")/shell_test.sh"
# expect_exit NAME CODE TEXT COMMAND...: exits CODE and prints TEXT
expect_exit() {
  local name="$1" code="$2" text="$3"
  shift 3
  expect "$name" "$code" "$(printf '%s' "$text" | sed 's/[][\.*^$]/\\&/g')" "$@"
}

run weights "$gshare" examples weights --out "$work/weights" || { finish; exit 1; }
bench=("$gshare" bench function --device emulated --mechanism shim --model mlp
  --input-shape 1,1,28,28 --slice 256Mi)
run mlp "${bench[@]}" --repetitions 2 --json -- "$function_program" --model mlp \
  --weights "$work/weights/mlp.safetensors" &&
  check mlp_report python3 - "$work/mlp.stdout" <<'PY'
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
assert r["slice_alloc_ms"] > 0 and r["after_restore_ms"] > 0, r
assert 0 <= r["prepared_restores"] <= r["rounds"], r  # the preparer's hits, counted
# Emulated GPUs: the slice's memory comes back whole after a checkpoint, and nothing stays.
assert r["freed_bytes"] == 256 << 20, r
assert r["free_after_checkpoint_bytes"] == r["free_before_start_bytes"], r
assert r["context_bytes"] == 0, r
# A frozen image is skipped: the fast swap copies nothing and compares no digest.
assert r["fast_swap_copied_bytes"] == 0 and r["fast_swap_compared_bytes"] == 0, r
assert r["fast_swap_ms"] > 0, r
PY

# --no-freeze: the image is reported written at every checkpoint, as the CUDA shim reports it; the
# chunk digests find it unchanged after a restore, and nothing is copied.
run digests "${bench[@]}" --repetitions 2 --json -- "$function_program" --model mlp \
  --weights "$work/weights/mlp.safetensors" --no-freeze &&
  check digests_report python3 - "$work/digests.stdout" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "pass" and r["rounds"] == 2 and r["outputs_identical"] is True, r
assert r["allocated_bytes"] >= 23_298_088, r
assert r["fast_swap_copied_bytes"] == 0 and r["fast_swap_ms"] > 0, r
assert r["fast_swap_compared_bytes"] >= 23_298_088, r  # the digests did decide
PY

# --fresh-slices: every restore into a fresh segment, none prepared ahead.
run fresh "${bench[@]}" --repetitions 2 --fresh-slices --json -- "$function_program" --model mlp \
  --weights "$work/weights/mlp.safetensors" &&
  check fresh_report python3 - "$work/fresh.stdout" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "pass" and r["rounds"] == 2 and r["outputs_identical"] is True, r
assert r["prepared_restores"] == 0, r
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

echo -n "bench function: "
finish
