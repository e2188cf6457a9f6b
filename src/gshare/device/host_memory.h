// HostMemory: pinned (page-locked) host buffers that devices copy from and to.
//
// A pinned buffer is what lets a GPU copy asynchronously at the full speed of its link. Pin once
// and reuse: pinning is slow (it maps every page for the device), so the snapshot store allocates
// one large pool at start and carves it into chunks.
//
// CUDA: memory from cudaHostAlloc, portable to every GPU of the process, so a snapshot taken on
// one GPU can be restored onto another. Emulated: anonymous memory, locked with mlock where the
// process's RLIMIT_MEMLOCK allows and otherwise ordinary memory (page_locked() says which).
//
// Thread safety: HostMemory::Allocate may be called from any thread. A PinnedHostBuffer is a plain
// region of memory: concurrent access to the same bytes is the caller's to coordinate.
// Every PinnedHostBuffer must be destroyed before the HostMemory that made it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "gshare/common/status.h"

namespace gshare {

class PinnedHostBuffer {
 public:
  virtual ~PinnedHostBuffer() = default;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  std::span<std::byte> bytes() const { return bytes_; }
  std::uint64_t size_bytes() const { return bytes_.size(); }
  // Whether the pages are locked in memory (always true for CUDA).
  bool page_locked() const { return page_locked_; }

 protected:
  PinnedHostBuffer(std::span<std::byte> bytes, bool page_locked)
      : bytes_(bytes), page_locked_(page_locked) {}

 private:
  std::span<std::byte> bytes_;
  bool page_locked_;
};

class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // Allocates `size_bytes` (> 0) of pinned host memory. ResourceExhausted when the host lacks it.
  virtual Result<std::unique_ptr<PinnedHostBuffer>> Allocate(std::uint64_t size_bytes) = 0;
};

}  // namespace gshare
