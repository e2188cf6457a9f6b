#!/usr/bin/env bash
# Installs what is missing, then configures and builds gshare with the default preset (build/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs="${GSHARE_BUILD_JOBS:-$(nproc)}"
cmake --preset default >/dev/null
cmake --build --preset default -j "$jobs"
