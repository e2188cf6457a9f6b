#!/usr/bin/env bash
# The main job: installs what is missing, builds, and simulates the Azure LLM conversation trace
# (one hour, 19,366 requests) under each policy on the embedded defaults, writing the table,
# summary.json, CSV files and figures to out/demo. Extra arguments go to `gshare sim`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/gshare sim \
  --catalog data/examples/small-catalog.yaml \
  --trace data/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv \
  --trace-format azure-llm \
  --gpu-type a100-40gb \
  --seed 1 \
  --out out/demo \
  "$@"
