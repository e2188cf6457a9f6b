#include "gshare/device/emulated/emulated_host_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "gshare/common/units.h"

namespace gshare {
namespace {

class MappedHostBuffer final : public PinnedHostBuffer {
 public:
  MappedHostBuffer(std::span<std::byte> bytes, bool page_locked)
      : PinnedHostBuffer(bytes, page_locked) {}
  ~MappedHostBuffer() override { ::munmap(bytes().data(), bytes().size()); }
};

}  // namespace

Result<std::unique_ptr<PinnedHostBuffer>> EmulatedHostMemory::Allocate(std::uint64_t size_bytes) {
  if (size_bytes == 0) return InvalidArgument("cannot allocate 0 bytes of host memory");
  void* address =
      ::mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) {
    return ResourceExhausted(fmt::format("cannot map {} of host memory: {}",
                                         FormatBytes(size_bytes), std::strerror(errno)));
  }
  // Best effort: most unprivileged processes may lock only a few MiB.
  const bool page_locked = ::mlock(address, size_bytes) == 0;
  return std::unique_ptr<PinnedHostBuffer>(new MappedHostBuffer(
      std::span<std::byte>(static_cast<std::byte*>(address), size_bytes), page_locked));
}

}  // namespace gshare
