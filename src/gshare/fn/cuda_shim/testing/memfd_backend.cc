#include "gshare/fn/cuda_shim/testing/memfd_backend.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace gshare::fn::cuda_shim::testing {
namespace {

std::string Error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

MemfdBackend::~MemfdBackend() {
  if (base_ != nullptr) ::munmap(base_, reserve_bytes_);
}

Result<MemoryBackend::Range> MemfdBackend::Reserve(std::uintptr_t base_hint, std::uint64_t bytes) {
  if (base_ != nullptr) return FailedPrecondition("memfd backend: reserved already");
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t rounded = (bytes + page - 1) / page * page;
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void* got = ::mmap(reinterpret_cast<void*>(base_hint), rounded, PROT_NONE,
                     kFlags | MAP_FIXED_NOREPLACE, -1, 0);
  if (got == MAP_FAILED) got = ::mmap(nullptr, rounded, PROT_NONE, kFlags, -1, 0);
  if (got == MAP_FAILED) return IoError(Error("memfd backend: mmap"));
  base_ = got;
  reserve_bytes_ = rounded;
  return Range{.base = reinterpret_cast<std::uintptr_t>(got), .bytes = rounded};
}

Status MemfdBackend::Map(UniqueFd handle, MapHandleKind kind, std::uint64_t bytes) {
  if (kind != MapHandleKind::kMemfd) {
    return InvalidArgument("memfd backend: a descriptor of kind " +
                           std::to_string(static_cast<std::uint32_t>(kind)) + ", not a memfd");
  }
  struct stat info {};
  if (!handle.valid() || ::fstat(handle.get(), &info) != 0 || info.st_size < 0 ||
      static_cast<std::uint64_t>(info.st_size) < bytes) {
    return InvalidArgument("memfd backend: the segment is smaller than " + std::to_string(bytes) +
                           " bytes");
  }
  if (bytes > reserve_bytes_ || mapped_bytes_ != 0) {
    return FailedPrecondition("memfd backend: cannot map here");
  }
  if (::mmap(base_, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, handle.get(), 0) ==
      MAP_FAILED) {
    const std::string error = Error("memfd backend: mmap");
    ::mmap(base_, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return IoError(error);
  }
  mapped_bytes_ = bytes;
  segment_ = std::move(handle);
  return Status::Ok();
}

Status MemfdBackend::Unmap() {
  if (mapped_bytes_ == 0) return Status::Ok();
  if (::mmap(base_, mapped_bytes_, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
    return IoError(Error("memfd backend: unmap"));
  }
  mapped_bytes_ = 0;
  segment_.Reset();
  return Status::Ok();
}

Status MemfdBackend::Synchronize() {
  synchronize_count_.fetch_add(1);
  return Status::Ok();
}

}  // namespace gshare::fn::cuda_shim::testing
