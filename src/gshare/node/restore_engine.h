// RestoreEngine: moves snapshots between pinned host memory and GPUs, fast.
//
// Restore copies a snapshot (snapshot_store.h) into a device buffer on any GPU of the node, the
// one it was checkpointed from or another. Checkpoint copies a device buffer back into a
// snapshot, and skips the copy when the snapshot already holds exactly what that buffer holds:
// bound to the same buffer (by id) and the buffer's write generation unchanged since the snapshot
// was restored into it or checkpointed from it (device.h). This is the "fast swap": a function
// unlocked to run is preceded by DeviceBuffer::MarkWritten, so only a slice that nothing wrote
// since its restore is discarded without a copy.
//
// A checkpoint of a snapshot that is not bound to the buffer (the function wrote, or says it
// may have written, since) but that knows its chunks' digests (snapshot_store.h) first has the
// device compute the digest of each chunk of the buffer (CopyStream::Digest: a kernel on a GPU,
// whose memory is far faster than the link), then copies only the chunks whose digest changed,
// and records the new digests; a full checkpoint records them too. So a function that cannot say
// what it wrote (an unmodified CUDA program behind the allocator shim) still gets a fast swap
// when it wrote nothing, and a partial one when it wrote little (its activations).
//
// Both are cut into pieces and pipelined: each of the target GPU's S copy streams starts with
// `in_flight_per_stream` pieces and takes the next piece whenever one of its own ends, so that
// copies overlap their launches and completions, and a cancellation is seen within a few pieces.
// A piece is a snapshot chunk, or a part of one when the transfer is small: a transfer of n bytes
// is cut into pieces of ceil(n / S) bytes rounded up to 4 KiB, at least `min_piece_bytes` (a
// chunk's tail may be shorter), so that a small image is spread over every stream too. On a GPU the
// streams share the PCIe link; on an emulated GPU each stream is a thread running the copy engine
// (device/emulated/copy_engine.h).
//
// Asynchronous: StartRestore and StartCheckpointImage enqueue the first pieces and return; each
// piece's stream callback (CopyStream::Then) enqueues the stream's next piece, and the last one
// ends the transfer and calls `done`, on a thread of the device. Neither the engine nor the
// caller has a thread of its own waiting for the transfer (the device's streams do the waiting:
// an emulated stream's thread, a CUDA stream's waiter thread). Restore,
// Checkpoint and CheckpointImage are the same transfers, waited for.
//
// Sizes: a restore needs a buffer at least as large as the snapshot (it fills its start). A
// checkpoint needs a buffer of exactly the snapshot's size: a larger one (a slice that grew) is
// FailedPrecondition and a smaller one OutOfRange, and neither copies anything nor changes the
// snapshot; the caller makes a snapshot of the new size (SnapshotStore::Remove, then Create).
//
// Validity across failures: a restore marks the buffer written before its first copy, so a
// restore that fails or is cancelled leaves that buffer held by no snapshot, and binds the
// snapshot to it only on success. A checkpoint unbinds the snapshot before its first copy and
// binds it (at the generation read before copying) only on success.
//
// Cancellation and errors: a CancellationFlag passed in is checked before every piece. A
// transfer that is cancelled, or whose copy fails, ends only once every copy it enqueued has
// finished (each piece has its callback), so that when it ends none of its copies touches the
// buffers.
//
// Thread safety: every method may be called concurrently from several threads; transfers to the
// same GPU share its streams, as they share its link. Transfers of one snapshot are serialized by
// its transfer lock (Snapshot::TransferLock): a restore and a checkpoint of one snapshot never
// overlap, the second starts when the first ended and sees its binding (a Start call waits for
// the lock). The engine must be destroyed after every transfer ended, and before the devices it
// was created for.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/common/mutex.h"
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
  // The smallest piece a small transfer is cut into (a chunk is never cut below it).
  std::uint64_t min_piece_bytes = 256 * kKiB;
};

// What a transfer did.
struct TransferReport {
  std::uint64_t bytes = 0;  // bytes copied (0 when skipped)
  TimePoint started{};      // when the transfer started (a skipped one: not set)
  Duration elapsed{};       // from its start to the last piece's completion
  std::size_t chunks = 0;   // pieces copied
  bool skipped = false;     // a checkpoint of a snapshot that held the buffer: nothing copied
  // A checkpoint: bytes whose digests were compared on the device (0: none were), and bytes it
  // did not copy because the snapshot held them already (all of them when skipped).
  std::uint64_t compared_bytes = 0;
  std::uint64_t unchanged_bytes = 0;

  double bytes_per_second() const;
};

// How a checkpoint treats what the snapshot already holds.
struct CheckpointOptions {
  // Copy every chunk, even when the snapshot holds the buffer or a chunk's digest is unchanged.
  bool copy_all = false;
  // Digests: compare the device's with the snapshot's and copy only the chunks that changed
  // (when the snapshot knows them and copy_all is off), and record those of what the snapshot
  // holds afterwards, for the next checkpoint (when nothing wrote the buffer during the transfer;
  // and only for a store whose chunk size is a multiple of 8). Off: no chunk is compared, every
  // chunk is copied (unless the snapshot holds the buffer and copy_all is off), and the snapshot
  // then knows no digests, as a benchmark of raw transfers wants.
  bool digests = true;
};

class RestoreEngine {
 public:
  // Called once when a started transfer ends: on a thread of the device, or on the caller's
  // before the Start call returns when nothing was enqueued (a checkpoint skipped, a cancellation
  // already set, the first copy refused). It must not destroy the engine.
  using TransferDone = std::function<void(Result<TransferReport>)>;

  // Creates the copy streams of every device in `devices` (not owned; they must outlive the
  // engine). `clock` times the transfers and must outlive the engine. InvalidArgument for
  // options below 1; a device's error when it cannot create streams.
  static Result<std::unique_ptr<RestoreEngine>> Create(std::span<Device* const> devices,
                                                       RestoreEngineOptions options,
                                                       const Clock& clock);
  ~RestoreEngine();

  // Marks `destination` written, copies `snapshot` into its start, on the GPU that owns it, and
  // binds the snapshot to it. InvalidArgument when the buffer's GPU is not one of the engine's;
  // OutOfRange when the buffer is smaller than the snapshot; Cancelled; a device error.
  Result<TransferReport> Restore(Snapshot& snapshot, DeviceBuffer& destination,
                                 const CancellationFlag* cancel = nullptr);

  // Copies `source` into `snapshot` and binds the snapshot to it; skips the copy (skipped = true)
  // when the snapshot holds `source` already. InvalidArgument for a foreign GPU;
  // FailedPrecondition when `source` is larger than the snapshot, OutOfRange when smaller (checked
  // before any skip); Cancelled; a device error.
  Result<TransferReport> Checkpoint(const DeviceBuffer& source, Snapshot& snapshot,
                                    const CancellationFlag* cancel = nullptr,
                                    CheckpointOptions options = {});
  // As Checkpoint, for an image that is the first `image_bytes` of `source`: a function's memory
  // in use at the start of a larger slice. The snapshot holds those bytes, and its size must be
  // `image_bytes`; OutOfRange otherwise, or when the image is larger than the buffer.
  Result<TransferReport> CheckpointImage(const DeviceBuffer& source, std::uint64_t image_bytes,
                                         Snapshot& snapshot,
                                         const CancellationFlag* cancel = nullptr,
                                         CheckpointOptions options = {});

  // The same transfers, started: the checks above are done at once (an error returned means
  // nothing started and `done` is never called); `done` gets the rest. `snapshot`, the buffer and
  // `cancel` must stay alive until `done` is called.
  Status StartRestore(Snapshot& snapshot, DeviceBuffer& destination, const CancellationFlag* cancel,
                      TransferDone done);
  Status StartCheckpointImage(const DeviceBuffer& source, std::uint64_t image_bytes,
                              Snapshot& snapshot, const CancellationFlag* cancel, TransferDone done,
                              CheckpointOptions options = {});

  const RestoreEngineOptions& options() const { return options_; }

  // Waits until every transfer started so far has ended and its `done` has returned (a node that
  // stops waits for this before its event loop goes, since `done` may post to it). The destructor
  // waits too.
  void WaitForTransfers() EXCLUDES(transfers_mutex_);

 private:
  class Job;
  void TransferEnded() EXCLUDES(transfers_mutex_);
  struct DeviceStreams {
    const Device* device;
    std::vector<std::unique_ptr<CopyStream>> streams;
  };
  enum class Direction { kToDevice, kToHost };
  // A checkpoint's digests: none; computed beside a full copy and recorded; or compared first.
  enum class DigestUse { kNone, kRecord, kCompare };

  RestoreEngine(RestoreEngineOptions options, const Clock& clock,
                std::vector<DeviceStreams> devices);
  Result<std::vector<std::unique_ptr<CopyStream>>*> StreamsFor(const DeviceBuffer& buffer);
  // Checks a checkpoint of an image; OK when it may start.
  Status CheckImage(const DeviceBuffer& source, std::uint64_t image_bytes,
                    const Snapshot& snapshot);
  // Cuts the transfer into pieces and starts it; the lock is held until it ends.
  void Launch(Direction direction, DigestUse digests, Snapshot& snapshot,
              Snapshot::TransferLock lock, const DeviceBuffer& buffer, std::uint64_t generation,
              std::vector<std::unique_ptr<CopyStream>>& streams, const CancellationFlag* cancel,
              TransferDone done);
  // The copy pieces of the snapshot's chunks (those `chunks` selects; null: all), each chunk
  // followed by its digest when `digest_each`.
  struct Piece;
  std::vector<Piece> CutPieces(const Snapshot& snapshot, const std::vector<bool>* chunks,
                               bool digest_each) const;
  // Runs `start` with a TransferDone and waits for it.
  static Result<TransferReport> Wait(const std::function<Status(TransferDone)>& start);

  const RestoreEngineOptions options_;
  const Clock& clock_;
  // Fixed at creation; CopyStream methods are thread-safe, so no lock is needed.
  std::vector<DeviceStreams> devices_;
  Mutex transfers_mutex_;
  CondVar transfers_changed_;
  int transfers_ GUARDED_BY(transfers_mutex_) = 0;  // started and not ended
};

}  // namespace gshare
