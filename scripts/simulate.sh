#!/usr/bin/env bash
# The simulation demo: installs what is missing, builds, generates a multi-tenant workload (100 functions
# of 10 tenants, 10 minutes, calibrated to Azure Functions) and simulates it under each policy on
# the embedded defaults, writing the table, summary.json, CSV files and figures to out/demo.
# The first two minutes (the cluster's cold start) are left out of the figures. Extra arguments go
# to `gshare sim` (for example --exec-noise lognormal:0.2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh gshare
./build/gshare workload --functions 100 --duration 10m --seed 1 --out out/demo/workload
./build/gshare sim \
  --catalog out/demo/workload/catalog.yaml \
  --trace out/demo/workload/invocations.csv \
  --policy keepalive,faaswap,gshare \
  --gpu-type a100-40gb \
  --warmup 2m \
  --seed 1 \
  --out out/demo \
  "$@"
