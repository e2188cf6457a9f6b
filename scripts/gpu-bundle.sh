#!/usr/bin/env bash
# gpu-bundle.sh: builds, on this machine, a self-contained folder that checks gShare on a bare
# GPU machine: one with an NVIDIA driver, the CUDA toolkit and Python with PyTorch, but no
# compiler-side packages of this project (no Debian -dev packages, no network).
#
#   scripts/gpu-bundle.sh OUT [BUILD_DIR]
#
# BUILD_DIR (default: build-bundle in the source tree) is a build tree of its own, configured with
# the CUDA backend on (the toolkit is required), the exact solver, the benchmarks and OpenBLAS off
# (the example models' forward pass runs on plain loops), SQLite and OpenSSL linked statically,
# tests on, and a run path of $ORIGIN/lib and $ORIGIN/../lib; only the targets the bundle carries
# are built (BUILD_DIR/gpu-bundle.manifest lists them). It is a release build with debug
# information, as the default build is, so that its compilations, through ccache
# (scripts/compiler-cache.sh), reuse the default build's objects where the flags agree (a BUILD_DIR
# beside build/, as scripts/test.sh gives); the bundled binaries are stripped. CXX picks the
# compiler, GSHARE_BUILD_JOBS the build jobs (default: every CPU).
#
# OUT (created; replaced only when it is an earlier bundle or empty) receives
#   gshare                       the command, stripped
#   libgshare-cuda-shim.so       the CUDA allocator shim, where the build has it (beside gshare,
#                                where `gshare bench function --mechanism shim` looks for it)
#   tests/                       every test labelled gpu (gpu-tests.txt lists them) and the helper
#                                programs they start, stripped
#   gshare-init, gshare-function, libgshare-fn.so
#                                what gshare serve starts beside gshare (the serve phase)
#   python/gshare_runtime/       the pytorch and python runtimes
#   real-models.py, serve-check.sh, serve-check.py
#                                the serve phase (run.sh serve): models, the phase, its table
#   examples/pytorch/            the PyTorch example function and its protocol layer
#   lib/                         the shared libraries the binaries need beyond the base system
#   run.sh, report.py            the check itself (scripts/gpu-bundle-run.sh) and its table
#   BUILD-INFO                   source revision, compiler, CUDA version, glibc/libstdc++ needed
# Never bundled: the C library (libc, libm, libdl, libpthread, librt, the dynamic loader),
# libstdc++, libgcc_s, libcuda and any other NVIDIA driver library.
#
# Checks, each fatal: every binary resolves (ldd) every library inside OUT except those base and
# driver libraries, and OUT holds at most 48 MiB (each file's size is printed otherwise).
# Exit status: 0 when the bundle is built and passes its checks, 1 when not, 2 on bad usage.
set -euo pipefail
shopt -s nullglob
source "$(dirname "${BASH_SOURCE[0]}")/compiler-cache.sh"
source "$(dirname "${BASH_SOURCE[0]}")/progress.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUT [BUILD_DIR]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$1"
build="${2:-${root}/build-bundle}"
jobs="${GSHARE_BUILD_JOBS:-$(nproc)}"
max_bytes=$((48 * 1024 * 1024))
bundle_marker=".gshare-gpu-bundle"
tree_marker=".gshare-gpu-bundle-tree"

# Sonames that the base system provides (never bundled), and those of the NVIDIA driver (never
# bundled; absent here, so "not found" is expected for them).
base_libraries='^(linux-vdso\.so\.[0-9]+|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
driver_libraries='^(libcuda\.so(\.[0-9]+)*|libnvidia-[A-Za-z0-9_.-]+|libnvcuvid\.so(\.[0-9]+)*|libcudadebugger\.so(\.[0-9]+)*)$'

fail() {
  echo "gpu-bundle: $*" >&2
  exit 1
}

# Never reconfigure a build tree, nor empty a folder, that this script did not make.
if [ -e "${build}/CMakeCache.txt" ] && [ ! -e "${build}/${tree_marker}" ]; then
  echo "gpu-bundle: ${build} holds a build tree this script did not create; refusing" >&2
  exit 2
fi
if [ -e "${out}" ] && [ ! -e "${out}/${bundle_marker}" ] &&
  [ -n "$(find "${out}" -mindepth 1 -maxdepth 1 -print -quit 2>/dev/null)" ]; then
  echo "gpu-bundle: ${out} exists and is not a bundle this script made; refusing" >&2
  exit 2
fi

started=${SECONDS}
echo "== configure ${build} (CUDA on; exact solver, benchmarks and OpenBLAS off; tests on)"
mkdir -p "${build}"
touch "${build}/${tree_marker}"
configure=(cmake -S "${root}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DGSHARE_ENABLE_CUDA=ON -DGSHARE_BUILD_EXACT=OFF -DGSHARE_BUILD_BENCH=OFF
  -DGSHARE_BUILD_TESTS=ON -DGSHARE_BUILD_FUZZ=OFF -DGSHARE_WITH_OPENBLAS=OFF -DGSHARE_WITH_GRPC=OFF
  -DOPENSSL_USE_STATIC_LIBS=TRUE
  "-DCMAKE_BUILD_RPATH=\$ORIGIN/lib;\$ORIGIN/../lib" "${compiler_cache_flags[@]}")
# Debian ships SQLite's static library with its -dev package; yaml-cpp's CMake package imports
# only its shared one, and fmt and spdlog ship no static library: those three go to lib/.
sqlite_static="$(${CXX:-c++} -print-file-name=libsqlite3.a 2>/dev/null || true)"
if [ -f "${sqlite_static}" ]; then
  configure+=("-DSQLite3_LIBRARY=$(realpath "${sqlite_static}")")
fi
if ! "${configure[@]}" >"${build}/bundle-configure.log" 2>&1; then
  tail -n 40 "${build}/bundle-configure.log"
  fail "the bundle's configuration failed (log: ${build}/bundle-configure.log)"
fi

manifest="${build}/gpu-bundle.manifest"
[ -f "${manifest}" ] || fail "the configuration wrote no ${manifest}"
mapfile -t targets < <(awk '{print $2}' "${manifest}")
targets+=(gshare_gpu_tests)
echo "== build ${targets[*]} (-j ${jobs})"
if ! logged "${build}/bundle-build.log" cmake --build "${build}" -j "${jobs}" \
  --target "${targets[@]}"; then
  tail -n 40 "${build}/bundle-build.log"
  fail "the bundle's build failed (log: ${build}/bundle-build.log)"
fi

echo "== assemble ${out}"
rm -rf "${out}"
mkdir -p "${out}/tests" "${out}/lib" "${out}/examples/pytorch"
touch "${out}/${bundle_marker}"
roots=()  # the files the dynamic loader starts from
while read -r kind target path; do
  [ -f "${path}" ] || fail "${target}: ${path} was not built"
  case "${kind}" in
    gshare) destination="${out}/gshare" ;;
    program | shim | library) destination="${out}/$(basename "${path}")" ;;
    test | helper) destination="${out}/tests/$(basename "${path}")" ;;
    *) fail "unknown entry '${kind}' in ${manifest}" ;;
  esac
  cp "${path}" "${destination}"
  if [ "${kind}" = shim ] || [ "${kind}" = library ]; then
    strip --strip-unneeded "${destination}"
  else
    strip --strip-all "${destination}"
  fi
  roots+=("${destination}")
  if [ "${kind}" = test ]; then basename "${path}" >>"${out}/tests/gpu-tests.txt"; fi
done <"${manifest}"
touch "${out}/tests/gpu-tests.txt"
cp "${root}/examples/pytorch/function.py" "${root}/src/python/gshare_runtime/kserve_unix.py" \
  "${out}/examples/pytorch/"
cp "${root}/scripts/gpu-bundle-run.sh" "${out}/run.sh"
cp "${root}/scripts/gpu-bundle-report.py" "${out}/report.py"
# The serve phase (run.sh serve): the Python runtimes where gshare serve looks for them (beside
# gshare-function), the models' maker and the phase's script and table.
mkdir -p "${out}/python/gshare_runtime"
for file in __init__.py device.py kserve_unix.py runtime_args.py pytorch_function.py \
  python_function.py; do
  cp "${root}/src/python/gshare_runtime/${file}" "${out}/python/gshare_runtime/"
done
cp "${root}/scripts/real-models.py" "${out}/real-models.py"
cp "${root}/scripts/gpu-serve-check.sh" "${out}/serve-check.sh"
cp "${root}/scripts/gpu-serve-check.py" "${out}/serve-check.py"
chmod +x "${out}/run.sh" "${out}/serve-check.sh"

# "NAME PATH" for each library `ldd FILE` lists; PATH is "not-found" when it does not resolve.
libraries_of() {
  ldd "$1" 2>/dev/null | awk '
    $2 == "=>" && $3 == "not" { print $1, "not-found"; next }
    $2 == "=>" { print $1, $3; next }
    $1 ~ /^\// { n = split($1, parts, "/"); print parts[n], $1 }
    $1 ~ /^linux-vdso/ { print $1, "(kernel)" }'
}

# Copy every library outside the base system and the driver into lib/, by soname, until the
# closure is reached (a copied library's own needs are looked up the next round).
for _ in 1 2 3 4 5; do
  copied=0
  for file in "${roots[@]}" "${out}"/lib/*; do
    [ -f "${file}" ] || continue
    while read -r name path; do
      if [[ "${name}" =~ ${base_libraries} || "${name}" =~ ${driver_libraries} ]]; then continue; fi
      [ "${path}" = not-found ] && continue  # reported by the check below
      if [ ! -e "${out}/lib/${name}" ]; then
        cp -L "${path}" "${out}/lib/${name}"
        copied=1
      fi
    done < <(libraries_of "${file}")
  done
  [ "${copied}" -eq 0 ] && break
done

echo "== check: every library resolves inside the bundle, the base system's and the driver's aside"
out_real="$(realpath "${out}")"
problems=()
for file in "${roots[@]}"; do
  while read -r name path; do
    if [[ "${name}" =~ ${base_libraries} || "${name}" =~ ${driver_libraries} ]]; then continue; fi
    if [ "${path}" = not-found ]; then
      problems+=("${file#"${out}"/}: ${name} not found")
    elif [[ "$(realpath "${path}")" != "${out_real}"/* ]]; then
      problems+=("${file#"${out}"/}: ${name} resolves outside the bundle, to ${path}")
    fi
  done < <(libraries_of "${file}")
done
if [ ${#problems[@]} -ne 0 ]; then
  printf '  %s\n' "${problems[@]}" >&2
  fail "${#problems[@]} library reference(s) would not resolve on the GPU machine"
fi
bundled=("${out}"/lib/*)
echo "ok: ${#roots[@]} binaries; lib/ holds ${#bundled[@]} libraries: ${bundled[*]##*/}"

# What the GPU machine must provide: the newest glibc and libstdc++ symbol versions used.
newest_version() {
  local prefix="$1"
  shift
  objdump -T "$@" 2>/dev/null | grep -o "${prefix}_[0-9][0-9.]*" | sort -u -V | tail -n 1
}
glibc_needed="$(newest_version GLIBC "${roots[@]}" "${out}"/lib/*)"
glibcxx_needed="$(newest_version GLIBCXX "${roots[@]}" "${out}"/lib/*)"
{
  echo "source: $(git -C "${root}" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "compiler: $(${CXX:-c++} --version | head -n 1)"
  echo "cuda: $(sed -n 's/.*building the CUDA device backend (CUDA \(.*\)).*/\1/p' \
    "${build}/bundle-configure.log" | head -n 1)"
  echo "needs: ${glibc_needed:-GLIBC ?}, ${glibcxx_needed:-GLIBCXX ?} (libstdc++), x86-64"
  echo "tests: $(tr '\n' ' ' <"${out}/tests/gpu-tests.txt")"
} >"${out}/BUILD-INFO"

echo "== size"
total="$(du -sb "${out}" | cut -f1)"
if [ "${total}" -gt "${max_bytes}" ]; then
  (cd "${out}" && find . -type f -printf '%s\t%p\n' | sort -rn)
  fail "the bundle holds ${total} bytes, above the limit of ${max_bytes} (48 MiB)"
fi
(cd "${out}" && find . -type f ! -name "${bundle_marker}" -printf '%10s  %p\n' | sort -k2)
cat "${out}/BUILD-INFO"
printf 'gpu-bundle: built %s: %s bytes (%.1f MiB of the 48 MiB limit) in %d s\n' "${out}" \
  "${total}" "$(awk -v b="${total}" 'BEGIN { print b / 1048576 }')" $((SECONDS - started))
echo "gpu-bundle: on the GPU machine, run ${out}/run.sh"
