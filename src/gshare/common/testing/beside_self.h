// BesideSelf: where a test finds a program or library it starts.
//
// In the build tree a test knows its helpers by their build paths (compile definitions). The GPU
// bundle (scripts/gpu-bundle.sh) moves tests and their helpers into one folder and the CUDA shim
// one folder above it, on a machine where the build tree does not exist. So a test looks beside
// its own executable first, then one folder up, and only then at the build path.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace gshare::testing {

// The first of <own folder>/<name>, <own folder>/../<name> and `build_path` that exists, where
// <name> is build_path's file name; `build_path` itself when none does.
inline std::string BesideSelf(const std::string& build_path) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path name = std::filesystem::path(build_path).filename();
    for (const auto& candidate :
         {self.parent_path() / name, self.parent_path().parent_path() / name}) {
      if (std::filesystem::exists(candidate, error)) return candidate.string();
    }
  }
  return build_path;
}

}  // namespace gshare::testing
