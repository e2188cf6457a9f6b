#!/usr/bin/env bash
# Installs what is missing, then configures and builds gshare with the default preset (build/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs="${GSHARE_BUILD_JOBS:-$(nproc)}"
# CI must prove that the CUDA parts (backend, switch drivers, shim, GPU bundle) compile: there the
# toolkit is required rather than found when present.
cuda=()
if [ "${CI:-}" = "true" ]; then cuda=(-DGSHARE_ENABLE_CUDA=ON); fi
cmake --preset default "${cuda[@]}" >/dev/null
cmake --build --preset default -j "$jobs"
