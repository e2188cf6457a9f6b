#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and UBSan in a tree of their
# own, and runs each for SECONDS (default 30) from its seed corpus (fuzz/corpus/NAME). Fails on
# the first crash, leak or undefined behaviour, leaving the input that caused it in the build
# tree (crash-*). For a longer hunt: scripts/fuzz.sh 600 (ten minutes per target).
#
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
seconds="${1:-30}"
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${2:-$src/build-fuzz}"
case "$seconds" in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number" >&2; exit 2 ;; esac
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is needed (apt-get install clang)" >&2; exit 2; }

# Each NAME has its source fuzz/NAME_fuzz.cc and its seeds in fuzz/corpus/NAME.
targets=(catalog trace units safetensors kserve_json kserve_binary grpc_infer http_request model_file_name
  prometheus_text)
flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
source "$src/scripts/compiler-cache.sh"
source "$src/scripts/progress.sh"
echo "== configure $build (clang, AddressSanitizer and UBSan)"
CC=clang CXX=clang++ cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DGSHARE_BUILD_FUZZ=ON -DGSHARE_BUILD_TESTS=OFF \
  -DGSHARE_BUILD_BENCH=OFF -DGSHARE_BUILD_EXACT=OFF -DGSHARE_ENABLE_CUDA=OFF \
  "${compiler_cache_flags[@]}" >/dev/null
echo "== build ${#targets[@]} targets (-j $(nproc))"
if ! logged "$build/fuzz-build.log" cmake --build "$build" -j "$(nproc)" \
  --target $(printf "gshare_%s_fuzz " "${targets[@]}"); then
  tail -n 40 "$build/fuzz-build.log"
  echo "FAIL: the fuzz targets do not build (log: $build/fuzz-build.log)"
  exit 1
fi

# fuzz_one NAME: one target for SECONDS; its exit status goes to fuzz/NAME.rc.
fuzz_one() {
  local name="$1" work="$build/fuzz/corpus-$1" rc=0  # new inputs go to work; seeds stay as they are
  mkdir -p "$work"
  (cd "$build/fuzz" && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "./gshare_${name}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 "$work" "$src/fuzz/corpus/$name" >"$build/fuzz/$name.log" 2>&1) || rc=$?
  echo "$rc" >"$build/fuzz/$name.rc"
}
# One target per CPU at a time: each runs for SECONDS of wall time whatever the others do.
parallel="$(nproc)"
echo "== fuzz each target for ${seconds} s, ${parallel} at a time"
for name in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n; done
  echo "fuzz: $name for ${seconds}s"
  fuzz_one "$name" &
done
wait

failed=0
for name in "${targets[@]}"; do
  if [ "$(cat "$build/fuzz/$name.rc" 2>/dev/null)" != 0 ]; then
    echo "FAIL: gshare_${name}_fuzz found a crash; see $build/fuzz/$name.log and crash-* there"
    tail -40 "$build/fuzz/$name.log"
    failed=1
  else
    grep -E '^stat::number_of_executed_units' "$build/fuzz/$name.log" | sed "s/^/  $name: /"
  fi
done
if [ "$failed" -eq 0 ]; then echo "fuzz: ${#targets[@]} passed, 0 failed"; else echo "fuzz: some target failed"; fi
exit "$failed"
