// SnapshotStore: functions' GPU state, kept in pinned host memory between runs.
//
// The store owns one pinned host pool, allocated (and so registered with the GPUs) once, and cut
// into fixed-size chunks. A snapshot is a function's device memory image: an ordered list of
// chunks, the last one possibly partly used. Chunks need not be adjacent in the pool; the restore
// engine copies them chunk by chunk, so fragmentation costs nothing.
//
// A snapshot is valid while the copy on the GPU is known to equal it (just restored, or just
// checkpointed, and not written since). Checkpointing a valid snapshot needs no copy: this is
// what makes a "fast swap" fast. Whoever lets a function write its device memory marks the
// snapshot invalid first.
//
// Lifetime: SnapshotRef is a counted handle. Remove() takes a snapshot out of the index at once;
// its chunks return to the pool when the last handle is dropped, so a restore in progress never
// sees its bytes reused. Every handle must be dropped before the store is destroyed.
//
// Thread safety: all SnapshotStore methods and SnapshotRef copies may be used from any thread.
// The bytes of a snapshot are not synchronized: writing a snapshot while it is being restored,
// checkpointed or read is the caller's bug.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/device/host_memory.h"

namespace gshare {

class SnapshotStore;

class Snapshot {
 public:
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  const std::string& function_id() const { return function_id_; }
  std::uint64_t size_bytes() const { return size_bytes_; }
  std::size_t chunk_count() const { return chunks_.size(); }
  // Chunk `index` (< chunk_count()); every chunk is the store's chunk size except the last.
  std::span<std::byte> chunk(std::size_t index) const { return chunks_[index]; }
  // Offset of chunk `index` in the function's device memory image.
  std::uint64_t chunk_offset_bytes(std::size_t index) const;

  bool valid() const { return valid_.load(std::memory_order_acquire); }
  void set_valid(bool valid) { valid_.store(valid, std::memory_order_release); }

  // Copies `source` into the image at `offset_bytes`, and marks the snapshot invalid (the GPU copy
  // no longer equals it). OutOfRange when it does not fit.
  Status Write(std::uint64_t offset_bytes, std::span<const std::byte> source);
  // Copies `destination.size()` bytes of the image from `offset_bytes`. OutOfRange when past end.
  Status Read(std::uint64_t offset_bytes, std::span<std::byte> destination) const;

 private:
  friend class SnapshotStore;
  Snapshot(std::string function_id, std::uint64_t size_bytes, std::uint64_t chunk_bytes,
           std::vector<std::span<std::byte>> chunks, std::vector<std::uint32_t> chunk_ids);

  const std::string function_id_;
  const std::uint64_t size_bytes_;
  const std::uint64_t chunk_bytes_;
  const std::vector<std::span<std::byte>> chunks_;
  const std::vector<std::uint32_t> chunk_ids_;  // positions in the pool, returned when freed
  std::atomic<bool> valid_{false};
  // Bookkeeping of the store, guarded by the store's mutex.
  int handles_ = 0;
  bool indexed_ = true;
};

// A counted handle to a snapshot. Copyable; empty when default-constructed or moved from.
class SnapshotRef {
 public:
  SnapshotRef() = default;
  SnapshotRef(const SnapshotRef& other);
  SnapshotRef& operator=(const SnapshotRef& other);
  SnapshotRef(SnapshotRef&& other) noexcept;
  SnapshotRef& operator=(SnapshotRef&& other) noexcept;
  ~SnapshotRef();

  explicit operator bool() const { return snapshot_ != nullptr; }
  Snapshot* get() const { return snapshot_; }
  Snapshot* operator->() const { return snapshot_; }
  Snapshot& operator*() const { return *snapshot_; }

 private:
  friend class SnapshotStore;
  SnapshotRef(SnapshotStore* store, Snapshot* snapshot);  // takes a handle already counted
  void Reset();

  SnapshotStore* store_ = nullptr;  // not owned
  Snapshot* snapshot_ = nullptr;    // not owned: the store owns snapshots
};

struct SnapshotStoreOptions {
  std::uint64_t pool_bytes = 4 * kGiB;
  std::uint64_t chunk_bytes = 8 * kMiB;
};

class SnapshotStore {
 public:
  // Allocates the pinned pool from `host_memory`, rounded down to whole chunks. InvalidArgument
  // when the chunk size is zero or the pool smaller than one chunk; the pool allocation's error
  // when the host lacks the memory.
  static Result<std::unique_ptr<SnapshotStore>> Create(HostMemory& host_memory,
                                                       SnapshotStoreOptions options);
  ~SnapshotStore();

  // A new, invalid snapshot of `size_bytes` (> 0) for `function_id`, with undefined contents.
  // AlreadyExists when the function has one; ResourceExhausted when the pool lacks the chunks.
  Result<SnapshotRef> Create(const std::string& function_id, std::uint64_t size_bytes)
      EXCLUDES(mutex_);
  // The function's snapshot, or NotFound.
  Result<SnapshotRef> Find(const std::string& function_id) const EXCLUDES(mutex_);
  // Takes the function's snapshot out of the store; its chunks are freed when the last handle
  // is dropped. NotFound when there is none.
  Status Remove(const std::string& function_id) EXCLUDES(mutex_);

  // Live handles to the function's snapshot (0 when it has none).
  int handle_count(const std::string& function_id) const EXCLUDES(mutex_);
  std::uint64_t chunk_bytes() const { return chunk_bytes_; }
  std::uint64_t capacity_bytes() const { return chunk_bytes_ * chunk_total_; }
  // Bytes of chunks held by snapshots, whole chunks counted (removed but referenced too).
  std::uint64_t used_bytes() const EXCLUDES(mutex_);
  std::uint64_t free_bytes() const EXCLUDES(mutex_);
  std::size_t snapshot_count() const EXCLUDES(mutex_);

 private:
  friend class SnapshotRef;
  SnapshotStore(std::unique_ptr<PinnedHostBuffer> pool, std::uint64_t chunk_bytes);
  void AddHandle(Snapshot* snapshot) EXCLUDES(mutex_);
  void DropHandle(Snapshot* snapshot) EXCLUDES(mutex_);
  void FreeLocked(Snapshot* snapshot) REQUIRES(mutex_);

  const std::unique_ptr<PinnedHostBuffer> pool_;
  const std::uint64_t chunk_bytes_;
  const std::size_t chunk_total_;
  mutable Mutex mutex_;
  std::vector<std::uint32_t> free_chunks_ GUARDED_BY(mutex_);  // a stack of pool positions
  std::map<std::string, Snapshot*> index_ GUARDED_BY(mutex_);
  // Every snapshot not yet freed, indexed or not.
  std::map<const Snapshot*, std::unique_ptr<Snapshot>> live_ GUARDED_BY(mutex_);
};

}  // namespace gshare
