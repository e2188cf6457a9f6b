// RestoreEngine: moves snapshots between pinned host memory and GPUs, fast.
//
// Restore copies a snapshot (snapshot_store.h) into a device buffer on any GPU of the node, the
// one it was checkpointed from or another. Checkpoint copies a device buffer back into a
// snapshot, and skips the copy when the snapshot is still valid (the GPU copy was not written
// since it was restored or checkpointed): the "fast swap".
//
// Both are chunked and pipelined: chunk i goes to copy stream i mod S of the target GPU, and each
// stream holds at most `in_flight_per_stream` chunks queued, so that copies overlap their
// launches and completions, and a cancellation is seen within a few chunks. On a GPU the streams
// share the PCIe link; on an emulated GPU each stream is a thread running memcpy.
//
// Cancellation: a CancellationFlag passed in is checked before every chunk. A cancelled transfer
// waits for its chunks already in flight, then returns Cancelled; the destination then holds a
// partial copy (a cancelled restore leaves the snapshot's validity as it was; a cancelled
// checkpoint marks it invalid).
//
// Thread safety: Restore and Checkpoint may be called concurrently from several threads;
// transfers to the same GPU share its streams, as they share its link. The engine must be
// destroyed before the devices it was created for; when a call returns, none of its copies is in
// flight. A snapshot must not be written while a transfer uses it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/common/status.h"
#include "gshare/device/device.h"
#include "gshare/node/snapshot_store.h"

namespace gshare {

// Set by one thread, seen by a transfer running on another.
class CancellationFlag {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> cancelled_{false};
};

struct RestoreEngineOptions {
  int streams_per_device = 4;
  int in_flight_per_stream = 2;
};

// What a transfer did.
struct TransferReport {
  std::uint64_t bytes = 0;  // bytes copied (0 when skipped)
  Duration elapsed{};       // from the call to the last chunk's completion
  std::size_t chunks = 0;   // chunks copied
  bool skipped = false;     // a checkpoint of a still-valid snapshot: nothing to copy

  double bytes_per_second() const;
};

class RestoreEngine {
 public:
  // Creates the copy streams of every device in `devices` (not owned; they must outlive the
  // engine). `clock` times the transfers and must outlive the engine. InvalidArgument for
  // options below 1; a device's error when it cannot create streams.
  static Result<std::unique_ptr<RestoreEngine>> Create(std::span<Device* const> devices,
                                                       RestoreEngineOptions options,
                                                       const Clock& clock);
  ~RestoreEngine();

  // Copies `snapshot` into the start of `destination`, on the GPU that owns `destination`, and
  // marks the snapshot valid. InvalidArgument when the buffer's GPU is not one of the engine's;
  // OutOfRange when the buffer is smaller than the snapshot; Cancelled; a device error.
  Result<TransferReport> Restore(Snapshot& snapshot, DeviceBuffer& destination,
                                 const CancellationFlag* cancel = nullptr);

  // Copies the start of `source` into `snapshot` and marks it valid; skips the copy when the
  // snapshot is already valid. Errors as Restore.
  Result<TransferReport> Checkpoint(const DeviceBuffer& source, Snapshot& snapshot,
                                    const CancellationFlag* cancel = nullptr);

  const RestoreEngineOptions& options() const { return options_; }

 private:
  struct DeviceStreams {
    const Device* device;
    std::vector<std::unique_ptr<CopyStream>> streams;
  };
  enum class Direction { kToDevice, kToHost };

  RestoreEngine(RestoreEngineOptions options, const Clock& clock,
                std::vector<DeviceStreams> devices);
  Result<std::vector<std::unique_ptr<CopyStream>>*> StreamsFor(const DeviceBuffer& buffer);
  Result<TransferReport> Transfer(Direction direction, Snapshot& snapshot,
                                  const DeviceBuffer& buffer, const CancellationFlag* cancel);

  const RestoreEngineOptions options_;
  const Clock& clock_;
  // Fixed at creation; CopyStream methods are thread-safe, so no lock is needed.
  std::vector<DeviceStreams> devices_;
};

}  // namespace gshare
