#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every check, one labelled step at a
# time, each with its own progress lines, then a summary of the steps with their times.
#
#   scripts/test.sh                  every step
#   scripts/test.sh STEP...          these steps, in the order below (build runs first whenever
#                                    ctest, minimal or bundle is named)
#   scripts/test.sh ctest -- ARGS    ctest with ARGS (for example -R Registry, or -L unit)
#
# Steps:
#   build    scripts/build.sh: every target of the default build (build/)
#   ctest    every ctest test of build/: unit, integration and end-to-end tests. Tests that read
#            ../shared/data skip themselves with a message when that folder is absent; GPU tests
#            (label gpu) skip themselves where there is no NVIDIA GPU
#   minimal  scripts/check-minimal-build.sh: every optional part off (build-minimal/)
#   bundle   scripts/check-gpu-bundle.sh: the self-contained GPU check (build-bundle/); only where
#            the default build has the CUDA backend (CI requires it)
#   fuzz     scripts/fuzz.sh 30: every libFuzzer target for 30 s (build-fuzz/)
# The minimal and bundle trees reuse the default build's objects through ccache
# (scripts/compiler-cache.sh). A failing step does not stop the later ones, except build.
# Exit status: 0 when every step passed, 1 otherwise, 2 on bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

all=(build ctest minimal bundle fuzz)
chosen=()
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; ctest_args=("$@"); break ;;
    build | ctest | minimal | bundle | fuzz) chosen+=("$1") ;;
    -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown step '$1' (steps: ${all[*]}; ctest arguments go after --)" >&2
       exit 2 ;;
  esac
  shift
done
if [ ${#chosen[@]} -eq 0 ]; then chosen=("${all[@]}"); fi
wants() { local s; for s in "${chosen[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
if ! wants build && { wants ctest || wants minimal || wants bundle; }; then chosen=(build "${chosen[@]}"); fi
steps=()
for s in "${all[@]}"; do if wants "$s"; then steps+=("$s"); fi; done

names=()
outcomes=()
times=()
started=${SECONDS}
failed=0
# run_step NAME DESCRIPTION COMMAND...: one labelled step, timed; its outcome goes to the summary.
run_step() {
  local name="$1" what="$2" begun=${SECONDS} rc
  shift 2
  echo
  echo "=== step $((${#names[@]} + 1))/${#steps[@]}: ${name}: ${what}"
  "$@"
  rc=$?
  names+=("${name}")
  times+=($((SECONDS - begun)))
  case "${rc}" in
    0) outcomes+=(passed) ;;
    77) outcomes+=(skipped) ;;
    *) outcomes+=("FAILED (exit ${rc})"); failed=1 ;;
  esac
  echo "=== step ${#names[@]}/${#steps[@]}: ${name}: ${outcomes[-1]} in ${times[-1]} s"
  return "${rc}"
}

# Whether build/ has the CUDA backend (the bundle needs it): its manifest lists the shim.
cuda_built() { grep -q '^shim ' build/gpu-bundle.manifest 2>/dev/null; }

bundle_step() {
  if ! cuda_built; then
    echo "no CUDA backend in build/ (the CUDA toolkit was not found): the bundle is left out"
    return 77
  fi
  bash scripts/check-gpu-bundle.sh "${root}/build-bundle/bundle" "${root}/build-bundle"
}

for s in "${steps[@]}"; do
  case "$s" in
    build)
      run_step build "every target of the default build (build/)" bash scripts/build.sh ||
        { echo "test.sh: the build failed; no later step can run" >&2; exit 1; } ;;
    ctest)
      run_step ctest "the tests of build/ ($(nproc) at a time)" \
        ctest --preset default -j "$(nproc)" "${ctest_args[@]}" ;;
    minimal)
      run_step minimal "every optional part off (build-minimal/)" \
        bash scripts/check-minimal-build.sh "${root}/build-minimal" "${root}" "${root}/build/gshare" ;;
    bundle)
      run_step bundle "the self-contained GPU check (build-bundle/)" bundle_step ;;
    fuzz)
      run_step fuzz "every libFuzzer target for 30 s (build-fuzz/)" \
        bash scripts/fuzz.sh 30 "${root}/build-fuzz" ;;
  esac
done

echo
echo "=== summary ($((SECONDS - started)) s in all)"
for i in "${!names[@]}"; do
  printf '  %-8s %-18s %5d s\n' "${names[$i]}" "${outcomes[$i]}" "${times[$i]}"
done
exit "${failed}"
