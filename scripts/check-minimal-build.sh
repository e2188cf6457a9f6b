#!/usr/bin/env bash
# check-minimal-build.sh: the optional stays optional. Configures and builds gshare with every
# optional part off (no exact solver or CBC, no benchmarks, no tests, no CUDA) in its own build
# tree, then checks that
#   1. the binary links no COIN-OR library (Cbc, Clp, Osi, CoinUtils), no gRPC or protobuf, and
#      holds no gshare::exact code, and CMake did not look CBC up;
#   2. `gshare optgap` is not a subcommand there;
#   3. `gshare sim` writes a summary.json byte-identical to the one of a full build's binary.
#
#   scripts/check-minimal-build.sh BUILD_DIR SOURCE_DIR FULL_GSHARE [CXX_COMPILER]
#
# BUILD_DIR is created (or reused, incrementally) for the minimal tree only; the full build is
# only read (FULL_GSHARE is run). Compilations go through ccache (scripts/compiler-cache.sh): a
# BUILD_DIR beside the full build's tree (build-minimal/ beside build/, as scripts/test.sh's
# minimal step gives) reuses that build's objects wherever the flags agree.
# Exit status: 0 when every check passes, 1 when one fails, 2 on bad usage.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/compiler-cache.sh"
source "$(dirname "${BASH_SOURCE[0]}")/progress.sh"

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR FULL_GSHARE [CXX_COMPILER]" >&2
  exit 2
fi
build="$1"
src="$(cd "$2" && pwd)" || exit 2
full_gshare="$3"
compiler="${4:-}"
jobs="$(nproc)"
marker="${build}/.gshare-minimal-build"

if [ ! -x "${full_gshare}" ]; then
  echo "check-minimal-build: the full build's gshare '${full_gshare}' is not an executable" >&2
  exit 2
fi
# Never reconfigure a build tree this script did not make (the full build, for one).
if [ -e "${build}/CMakeCache.txt" ] && [ ! -e "${marker}" ]; then
  echo "check-minimal-build: ${build} holds a build tree this script did not create; refusing" >&2
  exit 2
fi

failed=0
fail() {
  echo "FAIL: $*"
  failed=$((failed + 1))
}
pass() { echo "ok: $*"; }

echo "== configure ${build} (GSHARE_BUILD_EXACT=OFF GSHARE_BUILD_BENCH=OFF GSHARE_BUILD_TESTS=OFF GSHARE_ENABLE_CUDA=OFF GSHARE_WITH_GRPC=OFF)"
mkdir -p "${build}" && touch "${marker}"
configure=(cmake -S "${src}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DGSHARE_BUILD_EXACT=OFF -DGSHARE_BUILD_BENCH=OFF -DGSHARE_BUILD_TESTS=OFF
  -DGSHARE_ENABLE_CUDA=OFF -DGSHARE_WITH_GRPC=OFF "${compiler_cache_flags[@]}")
if [ -n "${compiler}" ]; then configure+=(-DCMAKE_CXX_COMPILER="${compiler}"); fi
if ! "${configure[@]}" >"${build}/configure.log" 2>&1; then
  tail -n 40 "${build}/configure.log"
  echo "FAIL: the minimal configuration does not configure (log: ${build}/configure.log)"
  exit 1
fi

echo "== build the gshare target (-j ${jobs})"
if ! logged "${build}/build.log" cmake --build "${build}" --target gshare -j "${jobs}"; then
  tail -n 40 "${build}/build.log"
  echo "FAIL: the minimal configuration does not build (log: ${build}/build.log)"
  exit 1
fi
minimal_gshare="${build}/gshare"
if [ ! -x "${minimal_gshare}" ]; then
  echo "FAIL: the build produced no ${minimal_gshare}"
  exit 1
fi
pass "built ${minimal_gshare}"

echo "== 1. no exact solver in the minimal binary"
if grep -q '^CBC_' "${build}/CMakeCache.txt"; then
  fail "CMake looked CBC up (CBC_* entries in ${build}/CMakeCache.txt)"
else
  pass "CMake did not look CBC up"
fi
coin='libCbc|libClp|libOsi|libCoinUtils'
needed="$(readelf -d "${minimal_gshare}" | grep NEEDED)"
if grep -Eq "${coin}" <<<"${needed}"; then
  fail "readelf -d lists a COIN-OR library: $(grep -E "${coin}" <<<"${needed}" | tr -s ' ')"
else
  pass "readelf -d: no Cbc/Clp/Osi/CoinUtils among $(wc -l <<<"${needed}") NEEDED entries"
fi
loaded="$(ldd "${minimal_gshare}")"
if grep -Eq "${coin}" <<<"${loaded}"; then
  fail "ldd resolves a COIN-OR library: $(grep -E "${coin}" <<<"${loaded}" | tr -s ' \t' ' ')"
else
  pass "ldd: no Cbc/Clp/Osi/CoinUtils loaded"
fi
if grep -Eq 'libgrpc|libprotobuf' <<<"${loaded}"; then
  fail "ldd resolves gRPC or protobuf: $(grep -E 'libgrpc|libprotobuf' <<<"${loaded}" | tr -s ' \t' ' ')"
else
  pass "ldd: no gRPC or protobuf loaded"
fi
exact_symbols="$(nm -C "${minimal_gshare}" | grep -c 'gshare::exact::')"
if [ "${exact_symbols}" -ne 0 ]; then
  fail "nm -C finds ${exact_symbols} gshare::exact:: symbols"
else
  pass "nm -C: no gshare::exact:: symbols"
fi

echo "== 2. gshare optgap is not a subcommand"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
if "${minimal_gshare}" optgap --help >"${work}/optgap.out" 2>&1; then
  fail "'gshare optgap --help' succeeded in the minimal build"
else
  pass "'gshare optgap --help' fails: $(head -n 1 "${work}/optgap.out")"
fi

echo "== 3. gshare sim: the same summary.json as the full build"
sim=(sim --catalog "${src}/data/examples/small-catalog.yaml"
  --trace "${src}/data/traces/azure-llm-2023/AzureLLMInferenceTrace_code.csv"
  --trace-format azure-llm --policy "keepalive,faaswap,gshare" --quiet)
echo "gshare ${sim[*]}"
if ! "${full_gshare}" "${sim[@]}" --out "${work}/full" >"${work}/full.log" 2>&1; then
  cat "${work}/full.log"
  fail "the full build's gshare sim failed"
elif ! "${minimal_gshare}" "${sim[@]}" --out "${work}/minimal" >"${work}/minimal.log" 2>&1; then
  cat "${work}/minimal.log"
  fail "the minimal build's gshare sim failed"
elif ! cmp "${work}/full/summary.json" "${work}/minimal/summary.json"; then
  diff <(tr ',' '\n' <"${work}/full/summary.json") \
    <(tr ',' '\n' <"${work}/minimal/summary.json") | head -n 20
  fail "summary.json differs between the full and the minimal build"
else
  pass "summary.json byte-identical ($(wc -c <"${work}/full/summary.json") bytes)"
fi

if [ "${failed}" -ne 0 ]; then
  echo "check-minimal-build: ${failed} check(s) failed"
  exit 1
fi
echo "check-minimal-build: every check passed"
