// MappedFile: a whole file mapped read-only into memory, unmapped when the object goes away.
//
// Move-only; the bytes stay valid while the MappedFile lives. The file's later changes on disk
// may or may not show through (MAP_PRIVATE): map files that are not being written. Open returns
// NotFound or IoError naming the path; an empty file maps to an empty span.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "gshare/common/status.h"

namespace gshare {

class MappedFile {
 public:
  static Result<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  MappedFile(const std::byte* data, std::size_t size) : data_(data), size_(size) {}
  void Reset();

  const std::byte* data_ = nullptr;  // the mapping (owned: munmap), or null when empty
  std::size_t size_ = 0;
};

}  // namespace gshare
