#!/usr/bin/env bash
# End-to-end checks of `gshare compare` on a tiny generated workload: pareto.json follows its
# contract (every field and type; at_equal_slo is each policy's cheapest point that reaches the
# target, null when none does), the results do not depend on --jobs, and bad flags exit with 2
# and a message naming what is wrong, writing nothing. Needs python3.
# Usage: compare_test.sh GSHARE_BINARY SOURCE_DIR
set -u
gshare="$1"
source "$(dirname "$0")/shell_test.sh"

if ! command -v python3 >/dev/null 2>&1; then
  echo "FAIL python3 is needed to check pareto.json (scripts/setup.sh installs it)"
  exit 1
fi

# 20 functions for one minute: 28,507 invocations of 5 functions (fewer functions invoke none).
run workload "$gshare" workload --quiet --functions 20 --duration 1m --seed 1 --out "$work/w" ||
  { finish; exit 1; }
compare=(compare --quiet --catalog "$work/w/catalog.yaml" --trace "$work/w/invocations.csv")

# expect_error NAME PATTERN ARGS...: exit code 2, stderr matching PATTERN, no output folder.
expect_error() {
  local name="$1" pattern="$2"
  shift 2
  expect "$name" 2 "$pattern" "$gshare" "$@" --out "$work/$name" &&
    check "$name: no output folder" test ! -e "$work/$name"
}

# The contract of pareto.json: check.py FILE SEEDS exits non-zero (with the assertion) on a breach.
cat >"$work/check.py" <<'PY'
import json, math, sys

doc = json.load(open(sys.argv[1]))
seeds = int(sys.argv[2])

def number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

def pair(x):
    return isinstance(x, list) and len(x) == 2 and all(number(v) for v in x) and x[0] <= x[1]

assert set(doc) == {"slo_target", "world", "policies", "at_equal_slo"}, sorted(doc)
assert isinstance(doc["world"], str) and doc["world"], doc["world"]
target = doc["slo_target"]
assert number(target) and 0 < target <= 1, target
assert list(doc["policies"]) == ["keepalive", "faaswap", "gshare"], list(doc["policies"])
knob_names = {"keepalive": {"keep_alive", "concurrency_target"},
              "faaswap": {"pool_idle", "proxy_overhead"},
              "gshare": {"safety_margin", "pool_idle", "protect_horizon"}}
at = doc["at_equal_slo"]
assert set(at) == {"slo", "gpu_seconds", "cost_usd"}, sorted(at)
assert at["slo"] == target
for policy, points in doc["policies"].items():
    assert isinstance(points, list) and points, policy
    for p in points:
        keys = {"knobs", "slo_attainment", "gpu_seconds", "cost_usd", "p99_ms", "utilisation"}
        assert set(p) == (keys | {"ci95"} if seeds > 1 else keys), sorted(p)
        assert isinstance(p["knobs"], dict) and set(p["knobs"]) == knob_names[policy], p["knobs"]
        assert all(isinstance(v, str) and v for v in p["knobs"].values()), p["knobs"]
        assert all(number(p[k]) for k in keys - {"knobs"}), p
        assert 0 <= p["slo_attainment"] <= 1 and p["gpu_seconds"] >= 0 and p["cost_usd"] >= 0
        if seeds > 1:
            ci = p["ci95"]
            assert set(ci) == {"slo_attainment", "gpu_seconds", "cost_usd"}, sorted(ci)
            for k, interval in ci.items():
                assert pair(interval) and interval[0] <= p[k] + 1e-9 <= interval[1] + 2e-9, (k, p)
    # The default grids: 4 x 4, 3 x 3, 4 x 2 x 2 settings, each listed once.
    assert len(points) == {"keepalive": 16, "faaswap": 9, "gshare": 16}[policy], len(points)
    assert len({json.dumps(p["knobs"], sort_keys=True) for p in points}) == len(points)
    # at_equal_slo: the cheapest point whose attainment reaches the target, else null.
    reaching = [p for p in points if p["slo_attainment"] >= target]
    if not reaching:
        assert at["gpu_seconds"][policy] is None and at["cost_usd"][policy] is None, policy
        continue
    cheapest = min(p["cost_usd"] for p in reaching)
    chosen = max((p for p in reaching if p["cost_usd"] == cheapest),
                 key=lambda p: p["slo_attainment"])
    assert at["cost_usd"][policy] == chosen["cost_usd"], (policy, at["cost_usd"][policy])
    assert at["gpu_seconds"][policy] == chosen["gpu_seconds"], policy
assert set(at["gpu_seconds"]) == set(at["cost_usd"]) == set(doc["policies"])
PY

# check_contract NAME DIR SEEDS: pareto.json against the contract, pareto.csv and pareto.gp there.
check_contract() {
  check "$1" python3 "$work/check.py" "$2/pareto.json" "$3" &&
    check "$1: pareto.csv" test -s "$2/pareto.csv" &&
    check "$1: pareto.gp" test -s "$2/pareto.gp"
}

# One seed, the whole trace: no intervals; a target some points reach and one none reaches.
if run compare_one_seed "$gshare" "${compare[@]}" --slo-target 0.5 --out "$work/one"; then
  check_contract contract_one_seed "$work/one" 1
  check "some policy reaches an SLO of 0.5" python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["at_equal_slo"]; sys.exit(0 if any(v is not None for v in d["cost_usd"].values()) else 1)' "$work/one/pareto.json"
  check "table on stdout" grep -q "At equal SLO" "$work/compare_one_seed.stdout"
fi
if run compare_slo_1 "$gshare" "${compare[@]}" --slo-target 1 --out "$work/none"; then
  check_contract contract_unreachable "$work/none" 1
  check "nothing reaches an SLO of 1: every at_equal_slo entry is null" python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["at_equal_slo"]; sys.exit(0 if all(v is None for v in d["cost_usd"].values()) else 1)' "$work/none/pareto.json"
fi

# Three seeds of execution noise after a warm-up: intervals, and the same file with any --jobs.
noisy=("${compare[@]}" --seeds 3 --exec-noise lognormal:0.2 --warmup 10s --slo-target 0.6)
if run compare_jobs_1 "$gshare" "${noisy[@]}" --jobs 1 --out "$work/j1" &&
  run compare_jobs_3 "$gshare" "${noisy[@]}" --jobs 3 --out "$work/j3"; then
  check_contract contract_three_seeds "$work/j1" 3
  check "results do not depend on --jobs (json)" cmp "$work/j1/pareto.json" "$work/j3/pareto.json"
  check "results do not depend on --jobs (csv)" cmp "$work/j1/pareto.csv" "$work/j3/pareto.csv"
fi

# --knob replaces one knob's values; the values are reported as typed.
run compare_knob "$gshare" "${compare[@]}" --policy keepalive --knob keepalive.keep_alive=30s,2m --out "$work/knob" &&
  check "knob override" python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["policies"]["keepalive"]; sys.exit(0 if [x["knobs"]["keep_alive"] for x in p] == ["30s"]*4 + ["2m"]*4 else 1)' "$work/knob/pareto.json"

# --generate: each seed generates its own workload, so two seeds give intervals of some width
# without any noise.
if run compare_generate "$gshare" compare --quiet --generate functions=20,duration=1m,slo-factor=3 --seeds 2 \
  --slo-target 0.5 --out "$work/gen2"; then
  check_contract contract_generated "$work/gen2" 2
  check "--generate: the seeds generate different workloads" python3 -c '
import json, sys
points = json.load(open(sys.argv[1]))["policies"]["gshare"]
sys.exit(0 if all(p["ci95"]["gpu_seconds"][1] > p["ci95"]["gpu_seconds"][0] for p in points) else 1)' "$work/gen2/pareto.json"
fi
expect_error generate_zero "generate: functions: '0' is outside \[1, 1000000\]" compare --quiet --generate functions=0,duration=1m
expect_error generate_word "generate: functions: 'ten' is not a whole number" compare --quiet --generate functions=ten,duration=1m
expect_error generate_twice "generate: 'duration' is given twice" compare --quiet --generate functions=5,duration=1m,duration=2m
expect_error generate_and_format "excludes" compare --quiet --generate functions=5,duration=1m --trace-format azure-llm
expect_error generate_key "generate: unknown key 'rate'" compare --quiet --generate functions=5,duration=1m,rate=3
expect_error generate_long "generate: duration: '30d' is outside" compare --quiet --generate functions=5,duration=30d
expect_error generate_factor "generate: slo-factor: 'nan' is not a number" compare --quiet --generate functions=5,duration=1m,slo-factor=nan
expect_error generate_and_catalog "excludes" compare --quiet --generate functions=5,duration=1m --catalog "$work/w/catalog.yaml"
expect_error no_source "catalog and --trace are required" compare --quiet

expect_error slo_zero "slo-target: '0' is outside (0, 1]" "${compare[@]}" --slo-target 0
expect_error slo_high "slo-target: '1.5' is outside" "${compare[@]}" --slo-target 1.5
expect_error slo_nan "slo-target: 'nan' is not a finite number" "${compare[@]}" --slo-target nan
expect_error seeds_zero "seeds: '0' is outside" "${compare[@]}" --seeds 0
expect_error seeds_many "seeds: '101' is outside" "${compare[@]}" --seeds 101
expect_error jobs_zero "jobs: '0' is outside" "${compare[@]}" --jobs 0
expect_error bad_policy "unknown policy 'magic'" "${compare[@]}" --policy magic
expect_error twice_policy "'gshare' is listed twice" "${compare[@]}" --policy gshare,gshare
expect_error knob_policy "knob: unknown policy 'magic'" "${compare[@]}" --knob magic.keep_alive=1m
expect_error knob_unknown "unknown knob 'bogus' for keepalive" "${compare[@]}" --knob keepalive.bogus=1
expect_error knob_not_compared "policy 'faaswap' is not among those compared" "${compare[@]}" --policy gshare --knob faaswap.pool_idle=1m
expect_error knob_value "a duration needs a unit" "${compare[@]}" --knob keepalive.keep_alive=5
expect_error knob_range "'20' is outside \[0.05, 10\]" "${compare[@]}" --knob keepalive.concurrency_target=20
expect_error knob_syntax "expected POLICY.KNOB=V1,V2" "${compare[@]}" --knob keepalive
expect_error bad_warmup "warmup: '5': a duration needs a unit" "${compare[@]}" --warmup 5
expect_error late_warmup "after the last arrival" "${compare[@]}" --warmup 2h
expect_error bad_noise "exec-noise" "${compare[@]}" --exec-noise lognormal:9
expect_error negative_cap "max-gpus" "${compare[@]}" --max-gpus -1
expect_error bad_gpu "unknown GPU type 'v100'" "${compare[@]}" --gpu-type v100
expect_error generate_regime "unknown regime 'disk' (known: compute, memory)" compare --quiet --generate functions=10,duration=1m,regime=disk
expect_error generate_batching "batching: 'maybe' is neither on nor off" compare --quiet --generate functions=10,duration=1m,batching=maybe
expect_error workload_regime "unknown regime 'disk'" workload --quiet --functions 10 --duration 1m --regime disk
expect_error ideal_and_prior "excludes" "${compare[@]}" --ideal --prior-error 0.1
expect_error zero_host "host-bandwidth: '0' is not a positive size" "${compare[@]}" --host-bandwidth 0
expect_error bad_restore_noise "restore-noise" "${compare[@]}" --restore-noise lognormal:9
expect_error big_prior "prior-error" "${compare[@]}" --prior-error 0.95
expect_error zero_nodes "gpus-per-node" "${compare[@]}" --gpus-per-node 0
expect_error bad_fragmentation "fragmentation: 'maybe' is neither on nor off" "${compare[@]}" --fragmentation maybe

# The ideal world reproduces, figure for figure, what the simulator gave before the fair world
# existed (the 100-function workload, 2 minutes, seed 1, generated without batching as it was
# then; the policies of then whose code has not changed since, gshare's having changed; testdata
# written by that build).
if run ideal_world "$gshare" sim --quiet --ideal --generate functions=100,duration=2m,batching=off --seed 1 \
  --policy keepalive,faaswap-fifo,faascache --out "$work/ideal"; then
  # The columns that existed then (later ones were added since); faaswap was then what
  # faaswap-fifo is now.
  cut -d, -f1-14 "$work/ideal/policies.csv" | sed 's/^faaswap-fifo,/faaswap,/' >"$work/ideal/then.csv"
  check ideal_figures_unchanged diff "$2/src/gshare/sim/testdata/ideal_100fn_2m_seed1.csv" \
    "$work/ideal/then.csv"
  check ideal_world_named grep -q '"world": "ideal"' "$work/ideal/summary.json"
fi
# The default world is the fair one, and says so.
if run fair_world "$gshare" sim --quiet --generate functions=20,duration=1m --seed 1 \
  --policy gshare --out "$work/fair"; then
  check fair_world_named grep -q '"world": "gpus-per-node=8,host-bandwidth=50GB/s.*,fragmentation"' \
    "$work/fair/summary.json"
fi

expect_error no_trace "cannot open the file" compare --quiet --catalog "$work/w/catalog.yaml" --trace "$work/none.csv"

finish
