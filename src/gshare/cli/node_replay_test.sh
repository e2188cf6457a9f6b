#!/usr/bin/env bash
# gshare node replay end to end: the bundled example functions as real processes on two emulated
# GPUs, a 10-second generated trace, every answer checked (zero wrong outputs, every request
# answered), the report layouts (memory.json among them); and clear errors (exit 2) for bad input.
# Usage: node_replay_test.sh GSHARE_BINARY SOURCE_DIR
set -u
gshare="$1"
src="$2"
source "$(dirname "$0")/shell_test.sh"
chmod 755 "$work"  # the functions run as their tenants' uids when this runs as root

# A copy of the bundled catalog: the replay writes the weights beside it (weights/).
cp "$src/examples/catalog.yaml" "$work/catalog.yaml"
run workload "$gshare" workload --catalog "$work/catalog.yaml" --duration 10s --seed 3 --rps 5 \
  --out "$work/trace" || { finish; exit 1; }
rows=$(($(wc -l <"$work/trace/invocations.csv") - 1))
run replay "$gshare" node replay --catalog "$work/catalog.yaml" --trace "$work/trace/invocations.csv" \
  --duration 10s --memory-interval 1s --out "$work/replay"
check replay_reports python3 - "$work/replay" "$rows" <<'PY'
import json, sys
out, rows = sys.argv[1], int(sys.argv[2])
s = json.load(open(f"{out}/summary.json"))
assert s["wrong_outputs"] == 0, s["wrong_outputs"]
assert s["answered"] == rows and s["failed"] == 0, (s["answered"], rows, s["failed"])
p = s["policies"]["gshare"]
assert p["requests"] == rows and 0 <= p["slo_attainment"] <= 1 and p["gpu_seconds"] > 0
f = json.load(open(f"{out}/fidelity.json"))
assert f["policy"] == "gshare" and 0 < f["requests"] < rows
for side in ("live", "sim"):
    assert set(f[side]) == {"slo_attainment", "gpu_seconds", "p50_ms", "p99_ms"}
    assert f[side]["gpu_seconds"] > 0
assert set(f["relative_error"]) == {"gpu_seconds", "p50_ms", "p99_ms"}
assert abs(f["slo_attainment_diff"] - (f["sim"]["slo_attainment"] - f["live"]["slo_attainment"])) < 1e-12
PY
# Memory samples every second: one at the start, and (the replay lasts until its last request,
# near the end of the 10 s, is answered) some after the warm-up of 10 s / 3, so growth is a number.
check memory_report python3 - "$work/replay" <<'PY'
import json, sys
m = json.load(open(f"{sys.argv[1]}/memory.json"))
assert m["interval_s"] == 1, m["interval_s"]
assert abs(m["warmup"]["end_s"] - 10 / 3) < 1e-6, m["warmup"]
assert m["growth_window_samples"] == 3
samples = m["samples"]
assert len(samples) >= 2, len(samples)
keys = {"t_s", "node_rss_bytes", "node_rss_anon_bytes", "node_rss_shmem_bytes",
        "functions_rss_bytes", "functions_rss_anon_bytes", "functions_rss_shmem_bytes",
        "processes"}
times = [s["t_s"] for s in samples]
assert times == sorted(times) and times[0] >= 0, times
for s in samples:
    assert set(s) == keys, set(s)
    assert s["node_rss_bytes"] > 0
    assert s["node_rss_anon_bytes"] + s["node_rss_shmem_bytes"] <= s["node_rss_bytes"] + (1 << 20)
    assert (s["processes"] == 0) == (s["functions_rss_bytes"] == 0), s
assert any(s["processes"] > 0 for s in samples)
g = m["growth"]
assert any(t > m["warmup"]["end_s"] for t in times)
for key in ("node", "node_and_functions", "node_anon", "node_shmem", "functions"):
    assert g[key] is None or isinstance(g[key], float), (key, g[key])
assert isinstance(g["node"], float) and g["node"] > -1, g
PY
check memory_summary grep -q "memory growth after warm-up" "$work/replay.stdout"
check weights_written test -s "$work/weights/mlp.safetensors" -a -s "$work/weights/cnn.safetensors"
check logs_written compgen -G "$work/replay/run/logs/*/*.log"

# expect_error NAME PATTERN ARGS...: exit 2 and a message naming what is wrong.
expect_error() {
  local name="$1" pattern="$2"
  shift 2
  expect "$name" 2 "$pattern" "$gshare" "$@"
}
replay=(node replay --catalog "$work/catalog.yaml" --trace "$work/trace/invocations.csv" --out "$work/bad")
expect_error cuda "on emulated GPUs only" "${replay[@]}" --device cuda
expect_error zero_duration "duration" "${replay[@]}" --duration 0s
expect_error unpaced "paced link" "${replay[@]}" --link-bandwidth 0
expect_error speedup "speedup" "${replay[@]}" --speedup nan
expect_error memory_interval_nan "memory-interval" "${replay[@]}" --memory-interval nans
expect_error memory_interval_zero "memory-interval" "${replay[@]}" --memory-interval 0s
expect_error memory_interval_long "memory-interval" "${replay[@]}" --memory-interval 2h
expect_error simulation_only "bundled runtimes" node replay \
  --catalog "$src/data/examples/small-catalog.yaml" \
  --trace "$src/data/traces/azure-llm-2023/AzureLLMInferenceTrace_code.csv" \
  --trace-format azure-llm --out "$work/bad"

finish
