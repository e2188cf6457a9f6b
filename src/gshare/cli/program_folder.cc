#include "gshare/cli/program_folder.h"

#include <system_error>

namespace gshare {

Result<std::filesystem::path> ProgramFolder() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return IoError("cannot find the gshare program (/proc/self/exe): " + error.message());
  }
  return self.parent_path();
}

}  // namespace gshare
