# compiler-cache.sh, sourced by the scripts that configure a build tree: ccache as the compiler
# launcher of every configuration they build (the default build, the minimal build, the GPU
# bundle, the fuzz targets), set so that those trees share their objects.
#
#   source scripts/compiler-cache.sh
#   cmake ... "${compiler_cache_flags[@]}"
#
# ccache hashes a compilation's command line and preprocessed source. Two build trees of the same
# depth below the source tree (build/, build-minimal/, build-bundle/) give the same command for a
# file whose flags agree once absolute paths under the source tree are made relative to the
# build tree (CCACHE_BASEDIR) and the build tree's own path is left out of the hash
# (CCACHE_NOHASHDIR; it is still written into the debug information). The settings travel in the
# launcher itself, so a later `cmake --build` of the tree, from any shell, uses them too.
# Without ccache on PATH the array is empty and the trees build without a launcher.
# GSHARE_NO_CCACHE=1 leaves it out as well (a measurement of a build from nothing).
compiler_cache_flags=()
if [ -z "${GSHARE_NO_CCACHE:-}" ] && command -v ccache >/dev/null 2>&1; then
  _gshare_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  _gshare_launcher="env;CCACHE_BASEDIR=${_gshare_root};CCACHE_NOHASHDIR=true;$(command -v ccache)"
  compiler_cache_flags=("-DCMAKE_CXX_COMPILER_LAUNCHER=${_gshare_launcher}")
  unset _gshare_root _gshare_launcher
else
  # A tree configured with the launcher before keeps it unless told otherwise.
  compiler_cache_flags=("-DCMAKE_CXX_COMPILER_LAUNCHER=")
fi
