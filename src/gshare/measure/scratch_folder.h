// ScratchFolder: a folder a benchmark makes for itself and removes, with everything in it, when
// the ScratchFolder goes. Not thread-safe; one owner.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "gshare/common/status.h"

namespace gshare::measure {

class ScratchFolder {
 public:
  ScratchFolder() = default;
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  ~ScratchFolder() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }

  // Creates `path` (and its parents); IoError when the system refuses.
  Status Create(std::filesystem::path path) {
    std::error_code error;
    std::filesystem::create_directories(path, error);
    if (error) {
      return IoError(fmt::format("cannot create {}: {}", path.string(), error.message()));
    }
    path_ = std::move(path);
    return Status::Ok();
  }
  // Empty until Create succeeds.
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace gshare::measure
