#!/usr/bin/env bash
# Installs what is missing, then configures and builds gshare with the default preset (build/).
#
#   scripts/build.sh              every target: the programs, the tests and the benchmarks
#   scripts/build.sh TARGET...    only these (scripts/run.sh builds the programs it runs)
#
# GSHARE_BUILD_JOBS sets the build's jobs (default: every CPU). Compilations go through ccache
# where it is installed (scripts/compiler-cache.sh), so the other configurations that the tests
# build (the minimal build, the GPU bundle) reuse this build's objects.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/compiler-cache.sh
jobs="${GSHARE_BUILD_JOBS:-$(nproc)}"
# CI must prove that the CUDA parts (backend, switch drivers, shim, GPU bundle) compile: there the
# toolkit is required rather than found when present.
cuda=()
if [ "${CI:-}" = "true" ]; then cuda=(-DGSHARE_ENABLE_CUDA=ON); fi
cmake --preset default "${cuda[@]}" "${compiler_cache_flags[@]}" >/dev/null
targets=()
if [ $# -gt 0 ]; then targets=(--target "$@"); fi
cmake --build --preset default -j "$jobs" "${targets[@]}"
