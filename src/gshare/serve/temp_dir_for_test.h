// A fresh directory under the system's temporary folder, removed with everything in it when the
// object goes. For the serve tests.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace gshare::serve {

class TempDirForTest {
 public:
  TempDirForTest() {
    std::string pattern = (std::filesystem::temp_directory_path() / "gshare-serve-test-XXXXXX");
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDirForTest() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDirForTest(const TempDirForTest&) = delete;
  TempDirForTest& operator=(const TempDirForTest&) = delete;

  // Empty when the directory could not be made.
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace gshare::serve
