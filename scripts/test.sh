#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with ctest.
# Tests that read ../shared/data skip themselves with a message when that folder is absent;
# GPU tests (label gpu) skip themselves where there is no NVIDIA GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --preset default -j "$(nproc)" "$@"
