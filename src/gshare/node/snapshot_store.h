// SnapshotStore: functions' GPU state, kept in pinned host memory between runs.
//
// The store owns one pinned host pool, allocated (and so registered with the GPUs) once, and cut
// into fixed-size chunks. A snapshot is a function's device memory image: an ordered list of
// chunks, the last one possibly partly used. Chunks need not be adjacent in the pool; the restore
// engine copies them chunk by chunk, so fragmentation costs nothing.
//
// Validity: a snapshot is bound to at most one device buffer, as (buffer id, write generation)
// (see DeviceBuffer in device/device.h): it holds exactly what that buffer holds while the
// buffer's id and write generation are the ones recorded. The restore engine binds it after a
// restore into a buffer or a checkpoint from it, and unbinds it when a checkpoint into it starts;
// Write unbinds it. Checkpointing a buffer the snapshot holds needs no copy: this is what makes
// a "fast swap" fast. Whoever lets a function write its device memory calls
// DeviceBuffer::MarkWritten first, which makes every snapshot bound to that buffer stale.
//
// Transfers: a snapshot has a transfer lock (Snapshot::TransferLock). The restore engine holds it
// for a whole restore or checkpoint, and Read and Write take it, so that transfers of one
// snapshot (and reads and writes of its bytes) never overlap: they run one after the other.
//
// Digests: a snapshot may also know the digest of each of its chunks (device/chunk_digest.h), as
// the device computed them when the chunk was last checkpointed. A checkpoint of a buffer the
// snapshot is not bound to compares them with the buffer's, computed on the device, and copies
// only the chunks that differ: the fast swap of a function that cannot say what it wrote (the
// CUDA allocator shim). Write forgets them.
//
// Lifetime: SnapshotRef is a counted handle. Remove() takes a snapshot out of the index at once;
// its chunks return to the pool when the last handle is dropped, so a restore in progress never
// sees its bytes reused. Every handle must be dropped before the store is destroyed.
//
// Thread safety: all SnapshotStore and Snapshot methods and SnapshotRef copies may be used from
// any thread. Holds() and binding() never wait for a transfer.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/device/device.h"
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
  // The store's chunk size (the last chunk may be shorter).
  std::uint64_t chunk_bytes() const { return chunk_bytes_; }
  // Chunk `index` (< chunk_count()); every chunk is the store's chunk size except the last.
  std::span<std::byte> chunk(std::size_t index) const { return chunks_[index]; }
  // Offset of chunk `index` in the function's device memory image.
  std::uint64_t chunk_offset_bytes(std::size_t index) const;

  // The device buffer whose contents the snapshot held when it was last bound.
  struct Binding {
    std::uint64_t buffer_id = 0;
    std::uint64_t write_generation = 0;
  };
  // Whether the snapshot holds exactly what `buffer` holds now: bound to it, and the buffer not
  // marked written since.
  bool Holds(const DeviceBuffer& buffer) const EXCLUDES(binding_mutex_);
  // The current binding; nullopt when the snapshot equals no device buffer that it knows of.
  std::optional<Binding> binding() const EXCLUDES(binding_mutex_);
  // Transfers now blocked on this snapshot's transfer lock, waiting for another one to end
  // (a measure of contention).
  int transfers_waiting() const { return transfers_waiting_.load(std::memory_order_acquire); }

  // Holds the snapshot's transfer lock from its construction to its destruction (blocking while
  // another transfer, Read or Write of the snapshot holds it), and lets its holder change the
  // binding. Movable: an asynchronous transfer takes it on the thread that starts it and lets it
  // go on the thread that ends it (the lock is a gate, not a mutex owned by a thread).
  class TransferLock {
   public:
    explicit TransferLock(Snapshot& snapshot);
    ~TransferLock();
    TransferLock(TransferLock&& other) noexcept;
    TransferLock& operator=(TransferLock&&) = delete;
    TransferLock(const TransferLock&) = delete;
    TransferLock& operator=(const TransferLock&) = delete;

    // Records that the snapshot now holds what `buffer` held at `write_generation`.
    void Bind(const DeviceBuffer& buffer, std::uint64_t write_generation);
    // Records that the snapshot equals no device buffer (its bytes are about to change).
    void Unbind();
    // The digests (device/chunk_digest.h) of the snapshot's chunks, in order; empty when not
    // known. A checkpoint compares them with the device's to copy only the chunks that changed.
    const std::vector<std::uint64_t>& digests() const;
    // Records them (one per chunk; anything else, or {}, records that they are not known).
    void SetDigests(std::vector<std::uint64_t> digests);

   private:
    Snapshot* snapshot_;  // null once moved from
  };

  // Copies `source` into the image at `offset_bytes`, and unbinds the snapshot. OutOfRange when
  // it does not fit. Waits for a transfer of the snapshot in progress.
  Status Write(std::uint64_t offset_bytes, std::span<const std::byte> source);
  // Copies `destination.size()` bytes of the image from `offset_bytes`. OutOfRange when past end.
  // Waits for a transfer of the snapshot in progress.
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
  // The transfer lock: held for whole transfers, by any thread; guards nothing but their order
  // (the chunks' bytes).
  void EnterTransfer() const EXCLUDES(gate_mutex_);
  void LeaveTransfer() const EXCLUDES(gate_mutex_);
  mutable Mutex gate_mutex_;
  mutable CondVar gate_changed_;
  mutable bool in_transfer_ GUARDED_BY(gate_mutex_) = false;
  mutable std::atomic<int> transfers_waiting_{0};
  mutable Mutex binding_mutex_;
  std::optional<Binding> binding_ GUARDED_BY(binding_mutex_);
  // Per chunk, of the bytes it holds; empty when not known. Read and written only by the holder
  // of the transfer lock (TransferLock::digests, SetDigests; Write clears them).
  std::vector<std::uint64_t> digests_;
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
