#include "gshare/node/restore_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "gshare/common/mutex.h"

namespace gshare {

double TransferReport::bytes_per_second() const {
  const double seconds = ToSeconds(elapsed);
  return seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
}

Result<std::unique_ptr<RestoreEngine>> RestoreEngine::Create(std::span<Device* const> devices,
                                                             RestoreEngineOptions options,
                                                             const Clock& clock) {
  if (options.streams_per_device < 1 || options.in_flight_per_stream < 1) {
    return InvalidArgument(fmt::format(
        "restore engine needs at least one stream and one chunk in flight (got {} and {})",
        options.streams_per_device, options.in_flight_per_stream));
  }
  std::vector<DeviceStreams> all;
  for (Device* device : devices) {
    DeviceStreams entry{device, {}};
    for (int i = 0; i < options.streams_per_device; ++i) {
      auto stream = device->CreateStream();
      if (!stream.ok()) return stream.status().WithContext("creating restore streams");
      entry.streams.push_back(std::move(stream).value());
    }
    all.push_back(std::move(entry));
  }
  return std::unique_ptr<RestoreEngine>(new RestoreEngine(options, clock, std::move(all)));
}

RestoreEngine::RestoreEngine(RestoreEngineOptions options, const Clock& clock,
                             std::vector<DeviceStreams> devices)
    : options_(options), clock_(clock), devices_(std::move(devices)) {}

RestoreEngine::~RestoreEngine() { WaitForTransfers(); }

void RestoreEngine::WaitForTransfers() {
  MutexLock lock(transfers_mutex_);
  transfers_changed_.Wait(transfers_mutex_,
                          [this]() REQUIRES(transfers_mutex_) { return transfers_ == 0; });
}

void RestoreEngine::TransferEnded() {
  // Notified under the lock: a waiter that sees 0 may destroy the engine as soon as it has it.
  MutexLock lock(transfers_mutex_);
  --transfers_;
  transfers_changed_.NotifyAll();
}

Result<std::vector<std::unique_ptr<CopyStream>>*> RestoreEngine::StreamsFor(
    const DeviceBuffer& buffer) {
  for (auto& entry : devices_) {
    if (entry.device == &buffer.device()) return &entry.streams;
  }
  return InvalidArgument(
      fmt::format("the restore engine does not drive {}", buffer.device().info().name));
}

// One transfer in flight: its pieces, the stream callbacks that feed them, and its end.
//
// A checkpoint that compares digests runs in two phases on the same streams: first a digest of
// every chunk, then copies of the chunks whose digest changed. Every other transfer is one phase.
// A copy of `host` to or from the device at `device_offset`, or, when `chunk` is set, the digest
// of that chunk's range of the device buffer (host gives its size only).
struct RestoreEngine::Piece {
  std::span<std::byte> host;
  std::uint64_t device_offset = 0;
  std::optional<std::size_t> chunk;
};

class RestoreEngine::Job : public std::enable_shared_from_this<RestoreEngine::Job> {
 public:
  Job(RestoreEngine& engine, Direction direction, DigestUse digests, Snapshot& snapshot,
      Snapshot::TransferLock lock, const DeviceBuffer& buffer, std::uint64_t generation,
      std::vector<std::unique_ptr<CopyStream>>& streams, std::size_t depth,
      const CancellationFlag* cancel, const Clock& clock, TransferDone done,
      std::vector<Piece> pieces)
      : engine_(engine),
        direction_(direction),
        digest_use_(digests),
        snapshot_(snapshot),
        lock_(std::move(lock)),
        buffer_(
            const_cast<DeviceBuffer&>(buffer)),  // written only by a restore, handed a mutable one
        generation_(generation),
        streams_(streams),
        depth_(depth),
        cancel_(cancel),
        clock_(clock),
        start_(clock.Now()),
        done_(std::move(done)),
        pieces_(std::move(pieces)) {
    if (digest_use_ != DigestUse::kNone) digests_.assign(snapshot_.chunk_count(), 0);
    if (digest_use_ == DigestUse::kCompare) recorded_ = lock_->digests();
  }

  // Enqueues each stream's first pieces; ends the transfer here when nothing was enqueued.
  void Start() EXCLUDES(mutex_) {
    bool ended = false;
    {
      MutexLock lock(mutex_);
      EnqueueFirst();
      ended = outstanding_ == 0;
    }
    if (ended) End();
  }

 private:
  const char* verb() const { return direction_ == Direction::kToDevice ? "restore" : "checkpoint"; }

  void EnqueueFirst() REQUIRES(mutex_) {
    for (std::size_t round = 0; round < depth_; ++round) {
      for (std::size_t s = 0; s < streams_.size(); ++s) EnqueueNext(s);
    }
  }

  // Enqueues the next piece on stream `s`, with its callback; records why not on an error.
  void EnqueueNext(std::size_t s) REQUIRES(mutex_) {
    if (!status_.ok() || next_ >= pieces_.size()) return;
    if (cancel_ != nullptr && cancel_->cancelled()) {
      status_ = Cancelled(fmt::format("{} of '{}' on {} cancelled after {} of {} bytes", verb(),
                                      snapshot_.function_id(), buffer_.device().info().name, bytes_,
                                      snapshot_.size_bytes()));
      return;
    }
    const Piece& piece = pieces_[next_];
    CopyStream& stream = *streams_[s];
    Status enqueued;
    if (piece.chunk.has_value()) {
      enqueued =
          stream.Digest(buffer_, piece.device_offset, piece.host.size(), &digests_[*piece.chunk]);
    } else if (direction_ == Direction::kToDevice) {
      enqueued = stream.CopyToDevice(buffer_, piece.device_offset, piece.host);
    } else {
      enqueued = stream.CopyToHost(piece.host, buffer_, piece.device_offset);
    }
    if (!enqueued.ok()) {
      status_ = enqueued.WithContext(fmt::format("{} of '{}'", verb(), snapshot_.function_id()));
      return;
    }
    ++next_;
    if (!piece.chunk.has_value()) {
      bytes_ += piece.host.size();
      ++copies_;
    }
    ++outstanding_;
    stream.Then([self = shared_from_this(), s](Status copied) { self->OnPiece(s, copied); });
  }

  // A piece of stream `s` ended: the stream takes the next one, the next phase starts, or the
  // transfer ends.
  void OnPiece(std::size_t s, const Status& copied) EXCLUDES(mutex_) {
    bool ended = false;
    {
      MutexLock lock(mutex_);
      --outstanding_;
      if (!copied.ok() && status_.ok()) {
        status_ = copied.WithContext(fmt::format("{} of '{}'", verb(), snapshot_.function_id()));
      }
      EnqueueNext(s);
      if (outstanding_ == 0 && status_.ok() && digest_use_ == DigestUse::kCompare && !compared_) {
        StartChangedCopies();
      }
      ended = outstanding_ == 0;
    }
    if (ended) End();
  }

  // Every chunk's digest is in: copies the chunks that changed (none: the transfer ends).
  void StartChangedCopies() REQUIRES(mutex_) {
    compared_ = true;
    std::vector<bool> changed(snapshot_.chunk_count(), false);
    for (std::size_t i = 0; i < changed.size(); ++i) {
      changed[i] = digests_[i] != recorded_[i];
      if (!changed[i]) unchanged_bytes_ += snapshot_.chunk(i).size();
    }
    pieces_ = engine_.CutPieces(snapshot_, &changed, false);
    next_ = 0;
    EnqueueFirst();
  }

  // Every copy enqueued has finished: binds the snapshot on success, lets its lock go, reports.
  void End() EXCLUDES(mutex_) {
    Result<TransferReport> result = Internal("unreachable");
    {
      MutexLock lock(mutex_);
      if (status_.ok()) {
        TransferReport report;
        report.bytes = bytes_;
        report.chunks = copies_;
        report.started = start_;
        report.elapsed = clock_.Now() - start_;
        if (digest_use_ == DigestUse::kCompare) {
          report.compared_bytes = snapshot_.size_bytes();
          report.unchanged_bytes = unchanged_bytes_;
        }
        lock_->Bind(buffer_, generation_);
        // A checkpoint rewrote the snapshot: it now holds the digests computed, or none. They
        // describe the bytes copied only if nothing wrote the buffer during the transfer (the
        // binding is stale then too).
        if (direction_ == Direction::kToHost) {
          const bool unwritten = buffer_.write_generation() == generation_;
          lock_->SetDigests(unwritten ? std::move(digests_) : std::vector<std::uint64_t>());
        }
        result = report;
      } else {
        // A checkpoint that failed may have changed some chunks: their digests are unknown. One
        // that failed while comparing changed nothing: the snapshot keeps what it recorded.
        const bool unchanged = digest_use_ == DigestUse::kCompare && !compared_;
        if (direction_ == Direction::kToHost && !unchanged) lock_->SetDigests({});
        result = status_;
      }
      lock_.reset();
    }
    {
      // Gone (with what it holds) before the transfer is counted out.
      TransferDone done = std::move(done_);
      done(std::move(result));
    }
    engine_.TransferEnded();  // last: the engine may go once it has counted this one out
  }

  RestoreEngine& engine_;
  const Direction direction_;
  const DigestUse digest_use_;
  Snapshot& snapshot_;
  std::optional<Snapshot::TransferLock> lock_;
  DeviceBuffer& buffer_;
  const std::uint64_t generation_;
  std::vector<std::unique_ptr<CopyStream>>& streams_;
  const std::size_t depth_;
  const CancellationFlag* const cancel_;
  const Clock& clock_;
  const TimePoint start_;
  TransferDone done_;  // called once, by End
  // The digests computed (written by the streams, read once every piece has ended), and those
  // the snapshot held when the transfer started (kCompare).
  std::vector<std::uint64_t> digests_;
  std::vector<std::uint64_t> recorded_;
  Mutex mutex_;
  std::vector<Piece> pieces_ GUARDED_BY(mutex_);    // of the current phase
  std::size_t next_ GUARDED_BY(mutex_) = 0;         // the next piece to enqueue
  std::size_t outstanding_ GUARDED_BY(mutex_) = 0;  // pieces whose callback has not run
  std::uint64_t bytes_ GUARDED_BY(mutex_) = 0;      // bytes enqueued
  std::size_t copies_ GUARDED_BY(mutex_) = 0;       // copies enqueued
  bool compared_ GUARDED_BY(mutex_) = false;        // kCompare: the copy phase started
  std::uint64_t unchanged_bytes_ GUARDED_BY(mutex_) = 0;
  Status status_ GUARDED_BY(mutex_);  // the first error
};

std::vector<RestoreEngine::Piece> RestoreEngine::CutPieces(const Snapshot& snapshot,
                                                           const std::vector<bool>* chunks,
                                                           bool digest_each) const {
  // Pieces: the snapshot's chunks (those selected), cut so that a small transfer (the selected
  // bytes) reaches every stream.
  const std::uint64_t count = static_cast<std::uint64_t>(options_.streams_per_device);
  constexpr std::uint64_t kPage = 4 * kKiB;
  std::uint64_t selected = snapshot.size_bytes();
  if (chunks != nullptr) {
    selected = 0;
    for (std::size_t i = 0; i < snapshot.chunk_count(); ++i) {
      if ((*chunks)[i]) selected += snapshot.chunk(i).size();
    }
  }
  const std::uint64_t spread = ((selected + count - 1) / count + kPage - 1) / kPage * kPage;
  const std::uint64_t piece_bytes = std::max<std::uint64_t>(options_.min_piece_bytes, spread);
  std::vector<Piece> pieces;
  for (std::size_t i = 0; i < snapshot.chunk_count(); ++i) {
    if (chunks != nullptr && !(*chunks)[i]) continue;
    const std::span<std::byte> chunk = snapshot.chunk(i);
    const std::uint64_t offset = snapshot.chunk_offset_bytes(i);
    for (std::uint64_t within = 0; within < chunk.size(); within += piece_bytes) {
      const std::uint64_t n = std::min<std::uint64_t>(piece_bytes, chunk.size() - within);
      pieces.push_back({chunk.subspan(within, n), offset + within, std::nullopt});
    }
    if (digest_each) pieces.push_back({chunk, offset, i});
  }
  return pieces;
}

void RestoreEngine::Launch(Direction direction, DigestUse digests, Snapshot& snapshot,
                           Snapshot::TransferLock lock, const DeviceBuffer& buffer,
                           std::uint64_t generation,
                           std::vector<std::unique_ptr<CopyStream>>& streams,
                           const CancellationFlag* cancel, TransferDone done) {
  std::vector<Piece> pieces;
  if (digests == DigestUse::kCompare) {
    // First phase: one digest per chunk; the copies are cut once the digests are in.
    for (std::size_t i = 0; i < snapshot.chunk_count(); ++i) {
      pieces.push_back({snapshot.chunk(i), snapshot.chunk_offset_bytes(i), i});
    }
  } else {
    pieces = CutPieces(snapshot, nullptr, digests == DigestUse::kRecord);
  }
  {
    MutexLock counted(transfers_mutex_);
    ++transfers_;
  }
  auto job = std::make_shared<Job>(*this, direction, digests, snapshot, std::move(lock), buffer,
                                   generation, streams,
                                   static_cast<std::size_t>(options_.in_flight_per_stream), cancel,
                                   clock_, std::move(done), std::move(pieces));
  job->Start();
}

Status RestoreEngine::StartRestore(Snapshot& snapshot, DeviceBuffer& destination,
                                   const CancellationFlag* cancel, TransferDone done) {
  GSHARE_ASSIGN_OR_RETURN(auto* streams, StreamsFor(destination));
  if (destination.size_bytes() < snapshot.size_bytes()) {
    return OutOfRange(fmt::format("restore of '{}' on {}: buffer of {} bytes, snapshot of {}",
                                  snapshot.function_id(), destination.device().info().name,
                                  destination.size_bytes(), snapshot.size_bytes()));
  }
  Snapshot::TransferLock lock(snapshot);
  // From here on the buffer's contents change: no snapshot holds it any more, this one included,
  // until the copy has succeeded.
  const std::uint64_t generation = destination.MarkWritten();
  Launch(Direction::kToDevice, DigestUse::kNone, snapshot, std::move(lock), destination, generation,
         *streams, cancel, std::move(done));
  return Status::Ok();
}

Status RestoreEngine::CheckImage(const DeviceBuffer& source, std::uint64_t image_bytes,
                                 const Snapshot& snapshot) {
  GSHARE_RETURN_IF_ERROR(StreamsFor(source).status());
  if (image_bytes > source.size_bytes() || image_bytes != snapshot.size_bytes()) {
    return OutOfRange(fmt::format(
        "checkpoint of '{}' on {}: an image of {} bytes of a {}-byte buffer into a snapshot of {}",
        snapshot.function_id(), source.device().info().name, image_bytes, source.size_bytes(),
        snapshot.size_bytes()));
  }
  return Status::Ok();
}

Status RestoreEngine::StartCheckpointImage(const DeviceBuffer& source, std::uint64_t image_bytes,
                                           Snapshot& snapshot, const CancellationFlag* cancel,
                                           TransferDone done, CheckpointOptions options) {
  GSHARE_RETURN_IF_ERROR(CheckImage(source, image_bytes, snapshot));
  GSHARE_ASSIGN_OR_RETURN(auto* streams, StreamsFor(source));
  Snapshot::TransferLock lock(snapshot);
  if (!options.copy_all && snapshot.Holds(source)) {
    { auto released = std::move(lock); }
    TransferReport report;
    report.skipped = true;
    report.unchanged_bytes = snapshot.size_bytes();
    done(report);
    return Status::Ok();
  }
  DigestUse digests = DigestUse::kNone;
  // A digest starts at a multiple of 8 bytes (CopyStream::Digest): chunks of another size get
  // none, and every checkpoint of theirs copies.
  if (options.digests && snapshot.chunk_bytes() % 8 == 0) {
    const bool known = lock.digests().size() == snapshot.chunk_count();
    digests = known && !options.copy_all ? DigestUse::kCompare : DigestUse::kRecord;
  }
  // Read before copying: a write that starts during the copy makes the binding stale.
  const std::uint64_t generation = source.write_generation();
  lock.Unbind();
  Launch(Direction::kToHost, digests, snapshot, std::move(lock), source, generation, *streams,
         cancel, std::move(done));
  return Status::Ok();
}

Result<TransferReport> RestoreEngine::Wait(const std::function<Status(TransferDone)>& start) {
  struct Outcome {
    Mutex mutex;
    CondVar changed;
    std::optional<Result<TransferReport>> result GUARDED_BY(mutex);
  };
  auto outcome = std::make_shared<Outcome>();
  GSHARE_RETURN_IF_ERROR(start([outcome](Result<TransferReport> result) {
    {
      MutexLock lock(outcome->mutex);
      outcome->result = std::move(result);
    }
    outcome->changed.NotifyAll();
  }));
  MutexLock lock(outcome->mutex);
  outcome->changed.Wait(outcome->mutex,
                        [&]() REQUIRES(outcome->mutex) { return outcome->result.has_value(); });
  return std::move(*outcome->result);
}

Result<TransferReport> RestoreEngine::Restore(Snapshot& snapshot, DeviceBuffer& destination,
                                              const CancellationFlag* cancel) {
  return Wait([&](TransferDone done) {
    return StartRestore(snapshot, destination, cancel, std::move(done));
  });
}

Result<TransferReport> RestoreEngine::Checkpoint(const DeviceBuffer& source, Snapshot& snapshot,
                                                 const CancellationFlag* cancel,
                                                 CheckpointOptions options) {
  // Validated before any skip, so that a skip never hides a caller's mistake.
  GSHARE_RETURN_IF_ERROR(StreamsFor(source).status());
  if (source.size_bytes() > snapshot.size_bytes()) {
    return FailedPrecondition(fmt::format(
        "checkpoint of '{}' on {}: device buffer of {} bytes is larger than its snapshot of {} "
        "(the slice grew): make a snapshot of the new size",
        snapshot.function_id(), source.device().info().name, source.size_bytes(),
        snapshot.size_bytes()));
  }
  return CheckpointImage(source, source.size_bytes(), snapshot, cancel, options);
}

Result<TransferReport> RestoreEngine::CheckpointImage(const DeviceBuffer& source,
                                                      std::uint64_t image_bytes, Snapshot& snapshot,
                                                      const CancellationFlag* cancel,
                                                      CheckpointOptions options) {
  return Wait([&](TransferDone done) {
    return StartCheckpointImage(source, image_bytes, snapshot, cancel, std::move(done), options);
  });
}

}  // namespace gshare
