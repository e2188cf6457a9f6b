#!/usr/bin/env bash
# End-to-end checks of the gshare command: clear errors (exit code 2 and a message naming what is
# wrong) for bad input, nothing written on failure, and byte-identical summaries for one seed.
# Usage: cli_test.sh GSHARE_BINARY SOURCE_DIR
set -u
gshare="$1"
src="$2"
source "$(dirname "$0")/shell_test.sh"
catalog="$src/data/examples/small-catalog.yaml"
trace="$src/data/traces/azure-llm-2023/AzureLLMInferenceTrace_code.csv"

# expect_error NAME PATTERN ARGS...: exit code 2, stderr matching PATTERN, no output folder.
expect_error() {
  local name="$1" pattern="$2"
  shift 2
  expect "$name" 2 "$pattern" "$gshare" "$@" --out "$work/$name" &&
    check "$name: no output folder" test ! -e "$work/$name"
}

sim=(sim --quiet --catalog "$catalog" --trace "$trace" --trace-format azure-llm)
expect_error missing_catalog "cannot open the catalog file" sim --catalog "$work/none.yaml" --trace "$trace"
expect_error bad_format "unknown trace format 'azure'" sim --catalog "$catalog" --trace "$trace" --trace-format azure
expect_error bad_duration "a duration needs a unit" "${sim[@]}" --warmup 5
expect_error bad_policy "unknown policy 'magic'" "${sim[@]}" --policy magic
expect_error bad_protect_horizon "--protect-horizon" "${sim[@]}" --protect-horizon 5
expect_error bad_gpu "unknown GPU type 'v100'" "${sim[@]}" --gpu-type v100
expect_error bad_granularity "slice-granularity" "${sim[@]}" --slice-granularity 12Qi
expect_error odd_granularity "multiple of 2Mi" "${sim[@]}" --slice-granularity 3Mi
expect_error negative_cap "max-gpus" "${sim[@]}" --max-gpus -1
# gshare node replay takes the same --slice-granularity, checked before anything runs.
replay=(node replay --catalog "$catalog" --trace "$trace")
expect_error replay_bad_granularity "slice-granularity" "${replay[@]}" --slice-granularity 12Qi
expect_error replay_odd_granularity "multiple of 2Mi" "${replay[@]}" --slice-granularity 3Mi
# gshare replay --predict names registered policies only, checked before anything is sent.
expect_error server_replay_bad_predict "--predict: unknown policy 'magic'" replay \
  --url http://127.0.0.1:9 --catalog "$catalog" --trace "$trace" --admin-key-file /dev/null \
  --predict keepalive,magic
expect_error replay_gpu_below_slice "less than one slice" "${replay[@]}" --gpu-memory 256Mi --slice-granularity 512Mi
expect_error bad_cold_start "instance-cold-start" "${sim[@]}" --instance-cold-start 3
expect_error wrong_format_header "bad header" sim --catalog "$catalog" --trace "$trace" --trace-format invocations
# Malformed flags and out-of-range values: exit 2 with a message naming the flag, never a silent
# wrap, truncation or NaN.
expect_error unknown_flag "not expected: --bogus" "${sim[@]}" --bogus
expect_error nan_overhead "proxy-overhead: 'nan' is not a finite number" "${sim[@]}" --proxy-overhead nan
expect_error inf_overhead "proxy-overhead: 'inf' is not a finite number" "${sim[@]}" --proxy-overhead inf
expect_error wrapped_seed "seed: '-1' is not a whole number" "${sim[@]}" --seed -1
expect_error huge_invocations "target-invocations" workload --functions 10 --duration 1m --target-invocations 18446744073709551615
expect_error negative_functions "functions: '-5'" workload --functions -5 --duration 1m
printf 'function,timestamp\nresnet50,0\nresnet50,1e12\n' >"$work/epoch.csv"
expect_error epoch_timestamp "more than the 31622400 s" sim --quiet --catalog "$catalog" --trace "$work/epoch.csv"
printf 'function,timestamp,duration\nresnet50,0,1e9\n' >"$work/long.csv"
expect_error long_duration "more than a day" sim --quiet --catalog "$catalog" --trace "$work/long.csv"
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n4046-11-16 18:15:46.68,1,1\n' >"$work/year.csv"
expect_error far_year "years 1970 to 2200" sim --quiet --catalog "$catalog" --trace "$work/year.csv" --trace-format azure-llm
printf 'functions:\n  - name: f\n    model_size: 1Mi\n    exec_latency: 1ms\n    max_batch: 2000000000\n' >"$work/batch.yaml"
expect_error huge_batch "max_batch: must be between 1 and 4096" sim --quiet --catalog "$work/batch.yaml" --trace "$trace" --trace-format azure-llm
mkdir -p "$work/dir.yaml"
expect_error catalog_directory "dir.yaml: is a directory" sim --quiet --catalog "$work/dir.yaml" --trace "$trace" --trace-format azure-llm

# gshare workload --catalog: a trace over a given catalog's functions.
printf 'functions:\n  - name: alpha\n    model_size: 1Mi\n    exec_latency: 2ms\n    runtime: echo\n  - name: beta\n    model_size: 1Mi\n    exec_latency: 1ms\n' >"$work/two.yaml"
expect_error workload_catalog_and_functions "excludes" workload --catalog "$work/two.yaml" --functions 3 --duration 1m
expect_error workload_catalog_and_profiles "excludes" workload --catalog "$work/two.yaml" --profiles "$catalog" --duration 1m
expect_error workload_rps_zero "rps: '0' is outside" workload --catalog "$work/two.yaml" --duration 1m --rps 0
expect_error workload_rps_nan "rps: 'nan' is not a finite number" workload --catalog "$work/two.yaml" --duration 1m --rps nan
expect_error workload_rps_huge "rps: '1e9' is outside" workload --catalog "$work/two.yaml" --duration 1m --rps 1e9
expect_error workload_rps_alone "rps requires --catalog" workload --duration 1m --rps 3
expect_error workload_missing_catalog "cannot open the catalog file" workload --catalog "$work/none.yaml" --duration 1m
printf 'functions:\n  - name: f\n    model_size: 1Mi\n    exec_latency: 1ms\n    runtime: mlp\n    env: {GSHARE_SOCKET: x}\n' >"$work/reserved.yaml"
expect_error workload_bad_catalog "env.GSHARE_SOCKET: names starting with GSHARE_ are set by the node" workload --catalog "$work/reserved.yaml" --duration 1m
expect_error workload_too_many "invocations; at most" workload --catalog "$work/two.yaml" --duration 1h --rps 1e6
# Rows name only the catalog's functions, both of them, and one seed gives the same bytes.
run workload_a "$gshare" workload --catalog "$work/two.yaml" --duration 5m --seed 4 --rps 10 --out "$work/wa" &&
  run workload_b "$gshare" workload --catalog "$work/two.yaml" --duration 5m --seed 4 --rps 10 --out "$work/wb" &&
  check workload_same_bytes cmp "$work/wa/invocations.csv" "$work/wb/invocations.csv" &&
  check workload_header [ "$(head -1 "$work/wa/invocations.csv")" = "function,timestamp" ] &&
  check workload_functions [ "$(tail -n +2 "$work/wa/invocations.csv" | cut -d, -f1 | sort -u | tr '\n' ' ')" = "alpha beta " ] &&
  check workload_no_catalog test ! -e "$work/wa/catalog.yaml"

# The same seed gives byte-identical summaries.
run sim_seed_a "$gshare" "${sim[@]}" --seed 7 --out "$work/a" &&
  run sim_seed_b "$gshare" "${sim[@]}" --seed 7 --out "$work/b" &&
  check deterministic_summary cmp "$work/a/summary.json" "$work/b/summary.json" &&
  check summary_has_gshare grep -q '"gshare"' "$work/a/summary.json"

# One slice granularity for the whole program: 100Mi (a multiple of the 2 MiB GPU page) is taken,
# and the memory held follows it (here more than with the default 128 MiB).
run granularity_100Mi "$gshare" "${sim[@]}" --policy gshare --slice-granularity 100Mi --out "$work/g100" &&
  run granularity_128Mi "$gshare" "${sim[@]}" --policy gshare --out "$work/g128" &&
  check granularity_changes_memory [ "$(grep -o '"vgpu_gib_seconds": [0-9.]*' "$work/g100/summary.json")" != \
    "$(grep -o '"vgpu_gib_seconds": [0-9.]*' "$work/g128/summary.json")" ]

# A cluster cap: no policy holds more GPUs than --max-gpus, and every request is answered.
run max_gpus "$gshare" "${sim[@]}" --max-gpus 1 --out "$work/cap" &&
  check max_gpus_peak bash -c "! grep '\"peak_gpus\": [2-9]' '$work/cap/summary.json'" &&
  check max_gpus_answered [ "$(grep -c '"failed_requests": 0' "$work/cap/summary.json")" -eq 3 ]

# gshare bench restore: fewer than 11 rounds are refused; the --json layout carries both
# directions, the raw method chosen and the spreads (docs/node.md).
expect bench_repetitions 2 "--repetitions" "$gshare" bench restore --device emulated --size 4Mi --repetitions 5
expect bench_chunk 2 "multiple of 8" "$gshare" bench restore --device emulated --size 4Mi --chunk 1001
run bench_restore_json "$gshare" bench restore --device emulated --size 4Mi --streams 2 --json &&
  check bench_restore_report python3 - "$work/bench_restore_json.stdout" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
assert out["streams"] == 2 and out["repetitions"] == 11 and out["chunk_bytes"] == 8 * 2**20
(r,) = out["results"]
assert r["size_bytes"] == 4 * 2**20
assert set(r["raw_methods"]) == {"memcpy", "memcpy_x2", "copy_engine_x2"}
assert r["raw_method"] in r["raw_methods"] and r["raw_gbps"] == max(r["raw_methods"].values())
assert abs(r["ratio"] - r["restore_gbps"] / r["raw_gbps"]) < 1e-9
for spread, median in ((r["raw_spread"], r["raw_gbps"]), (r["restore_spread"], r["restore_gbps"])):
    assert spread["min"] <= spread["q1"] <= median <= spread["q3"] <= spread["max"]
d = r["d2h"]
assert set(d["raw_methods"]) == {"memcpy", "memcpy_x2", "copy_engine_x2"}
assert d["raw_gbps"] == max(d["raw_methods"].values()) and d["checkpoint_gbps"] > 0
assert d["checkpoint_spread"]["min"] <= d["checkpoint_gbps"] <= d["checkpoint_spread"]["max"]
assert abs(d["ratio"] - d["checkpoint_gbps"] / d["raw_gbps"]) < 1e-9
PY
# Where the host cannot reach device memory (a paced emulated link, as a CUDA GPU), the raw
# methods are one pinned copy (memcpy), one stream, and S streams each copying an S-th, for S = 2,
# the engine's stream count (3) and twice it.
run bench_restore_paced "$gshare" bench restore --device emulated --link-bandwidth 8GB/s --size 4Mi --streams 3 --json &&
  check bench_restore_paced_report python3 - "$work/bench_restore_paced.stdout" <<'PY'
import json, sys
(r,) = json.load(open(sys.argv[1]))["results"]
assert set(r["raw_methods"]) == {"memcpy", "stream_x2", "stream_x3", "stream_x6"}, r["raw_methods"]
assert r["raw_gbps"] == max(r["raw_methods"].values()) and r["restore_gbps"] > 0
d = r["d2h"]
assert set(d["raw_methods"]) == {"stream", "stream_x2", "stream_x3", "stream_x6"}, d["raw_methods"]
assert d["raw_gbps"] == max(d["raw_methods"].values()) and d["checkpoint_gbps"] > 0
PY

# gshare node info on emulated GPUs: no CUDA driver ("none"), the runtime's version where CUDA is
# built ("none" otherwise), memory handed over as memfds, total and free memory (docs/node.md,
# Commands).
run node_info_text "$gshare" node info --device emulated --emulated 2x1Gi --no-measure &&
  check node_info_versions grep -Eq '^CUDA driver none, runtime (none|[0-9]+[.][0-9]+)$' "$work/node_info_text.stdout" &&
  check node_info_export grep -q 'EXPORT' "$work/node_info_text.stdout"
run node_info_json "$gshare" node info --device emulated --emulated 2x1Gi --no-measure --json &&
  check node_info_report python3 - "$work/node_info_json.stdout" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
assert out["backend"] == "emulated" and out["cuda_driver_version"] == "none"
import re
runtime = out["cuda_runtime_version"]
assert (re.fullmatch(r"\d+\.\d+", runtime) if out["cuda_built"] else runtime == "none"), runtime
assert [g["index"] for g in out["gpus"]] == [0, 1]
for g in out["gpus"]:
    assert g["memory_bytes"] == g["total_memory_bytes"] == g["free_memory_bytes"] == 2**30
    assert g["memory_export"] == "memfd" and g["memory_export_note"] == ""
    assert g["uuid"].startswith("EMU-")
PY
# gshare node info --device cuda: where there is no CUDA GPU, exit 1 with the cause named and no
# fallback; where nvidia-smi lists one, the CUDA backend.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  expect node_info_cuda_present 0 '"backend": "cuda"' "$gshare" node info --device cuda --no-measure --json
else
  expect node_info_cuda_missing 1 "--device cuda: \(no NVIDIA driver\|no CUDA GPU\|this gshare was built without CUDA\)" \
    "$gshare" node info --device cuda --no-measure --json &&
    check node_info_cuda_no_json test ! -s "$work/node_info_cuda_missing.stdout"
  # gshare serve --device cuda: the same refusal, naming the driver's library where it is missing,
  # before anything listens (its data folder's parents open to the tenants' uids, as serve asks).
  cuda_serve="$(mktemp -d)" && chmod 755 "$cuda_serve" &&
    expect serve_cuda_missing 1 "--device cuda: \(no NVIDIA driver: libcuda.so.1\|no CUDA GPU\|this gshare was built without CUDA\)" \
      "$gshare" serve --device cuda --data-dir "$cuda_serve/data" --listen 127.0.0.1:0 --grpc-listen off
  rm -rf "$cuda_serve"
fi

# gshare bench timeslice: 1, 2 and 3 mlp processes on one emulated GPU, every answer checked;
# the model's side of the --json layout follows from the solo latency and the quantum, whatever
# the machine's load makes them: n runs of the solo latency arriving together, taking turns in
# quanta (a run alone runs to its end), end as the round-robin below computes.
run bench_timeslice "$gshare" bench timeslice --rounds 3 --json &&
  check bench_timeslice_report python3 - "$work/bench_timeslice.stdout" <<'PY'
import json, statistics, sys
out = json.load(open(sys.argv[1]))
assert out["rounds"] == 3 and out["batch"] == 1 and out["quantum_ms"] == 20 and 0 < out["kernel_ms"]
solo, quantum = out["solo_ms"], out["quantum_ms"]
rows = out["results"]
assert [r["instances"] for r in rows] == [1, 2, 3]
assert rows[0]["live_median_ms"] == solo

def round_robin(n, compute, quantum):
    """Completion times of n runs of `compute` ms arriving at 0, taking quanta in turn."""
    left, now, ends, queue = [compute] * n, 0.0, [0.0] * n, list(range(n))
    while queue:
        run = queue.pop(0)
        piece = left[run] if not queue else min(quantum, left[run])
        now += piece
        left[run] -= piece
        if left[run] > 1e-12:
            queue.append(run)
        else:
            ends[run] = now
    return ends

for r in rows:
    assert r["live_median_ms"] > 0 and r["live_mean_ms"] > 0 and r["own_gpus_median_ms"] > 0
    expected = statistics.median(round_robin(r["instances"], solo, quantum))
    assert abs(r["sim_whole_median_ms"] - expected) < 1e-5 * solo, (r, expected)
    assert abs(r["sim_over_live"] - r["sim_median_ms"] / r["live_median_ms"]) < 1e-9
assert rows[0]["sim_median_ms"] <= rows[1]["sim_median_ms"] <= rows[2]["sim_median_ms"]
PY

# gshare tenant: add prints the new key alone on stdout (a gsk_ token) and creates the data
# directory (0700) with its secret (0600); a taken name is exit 1, a malformed one exit 2; list
# shows the tenants; remove forgets one, and removing it again is exit 1.
# check_tenant NAME EXPECTED_RC STDOUT_PATTERN STDERR_PATTERN ARGS...: gshare tenant ARGS exits
# EXPECTED_RC, its stdout matches STDOUT_PATTERN and its stderr STDERR_PATTERN (extended regular
# expressions; EMPTY: no output there).
check_tenant() {
  local name="$1" want_rc="$2" out_pattern="$3" err_pattern="$4" stream pattern
  shift 4
  expect "$name" "$want_rc" "" "$gshare" tenant "$@" || return 1
  for stream in stdout stderr; do
    if [ "$stream" = stdout ]; then pattern="$out_pattern"; else pattern="$err_pattern"; fi
    if [ "$pattern" = EMPTY ]; then
      check "$name: no $stream" test ! -s "$work/$name.$stream" || return 1
    else
      check "$name: $stream" grep -Eq -- "$pattern" "$work/$name.$stream" || return 1
    fi
  done
}
serve_dir="$work/serve/data"
check_tenant tenant_add 0 '^gsk_[A-Za-z0-9_-]{43}$' "added tenant 'acme'" add acme --data-dir "$serve_dir"
check_tenant tenant_add_second 0 '^gsk_' "added tenant 'globex'" add globex --data-dir "$serve_dir"
check tenant_one_key_line [ "$(wc -l <"$work/tenant_add.stdout")" -eq 1 ]
check tenant_keys_differ [ "$(cat "$work/tenant_add.stdout")" != "$(cat "$work/tenant_add_second.stdout")" ]
check tenant_dir_mode [ "$(stat -c %a "$serve_dir")" = 700 ]
check tenant_secret_mode [ "$(stat -c %a "$serve_dir/server.secret")" = 600 ]
check tenant_database test -f "$serve_dir/gshare.db"
check tenant_key_not_stored bash -c "! grep -rqF '$(cat "$work/tenant_add.stdout")' '$serve_dir'"
check_tenant tenant_add_taken 1 EMPTY "AlreadyExists: tenant 'acme' already exists" add acme --data-dir "$serve_dir"
check_tenant tenant_add_bad_name 2 EMPTY "InvalidArgument: a tenant name" add "a/b" --data-dir "$serve_dir"
check_tenant tenant_add_no_dir 2 EMPTY "data-dir is required" add acme
check_tenant tenant_list 0 '^acme +0 +[0-9]{4}-' EMPTY list --data-dir "$serve_dir"
check tenant_list_both [ "$(grep -c -E '^(acme|globex) ' "$work/tenant_list.stdout")" -eq 2 ]
check_tenant tenant_remove 0 '^removed tenant acme' EMPTY remove acme --data-dir "$serve_dir"
check_tenant tenant_remove_again 1 EMPTY "NotFound: tenant 'acme' does not exist" remove acme --data-dir "$serve_dir"
check_tenant tenant_list_after 0 '^globex ' EMPTY list --data-dir "$serve_dir"
check tenant_list_after_remove bash -c "! grep '^acme ' '$work/tenant_list_after.stdout'"
check_tenant tenant_list_missing 1 EMPTY "no such data directory" list --data-dir "$work/serve/none"
check tenant_list_missing_creates_nothing test ! -e "$work/serve/none"
chmod 644 "$serve_dir/server.secret"
check_tenant tenant_loose_secret 1 EMPTY "FailedPrecondition: .*server.secret: mode 0644.*chmod 600" add initech --data-dir "$serve_dir"

# gshare optgap, where it is built (GSHARE_BUILD_EXACT): a bad --sizes list is refused before
# anything is solved.
if "$gshare" optgap --help >/dev/null 2>&1; then
  optgap=(optgap --quiet --instances 1 --requests 3 --time-limit 5s)
  expect_error optgap_sizes_order "sizes must increase" "${optgap[@]}" --sizes 8,6
  expect_error optgap_sizes_word "is not a number of requests" "${optgap[@]}" --sizes 6,x
  expect_error optgap_size_limit "size-time-limit" "${optgap[@]}" --sizes 6 --size-time-limit 5
fi

finish
