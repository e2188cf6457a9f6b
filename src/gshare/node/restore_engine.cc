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
class RestoreEngine::Job : public std::enable_shared_from_this<RestoreEngine::Job> {
 public:
  struct Piece {
    std::span<std::byte> host;
    std::uint64_t device_offset = 0;
  };

  Job(RestoreEngine& engine, Direction direction, Snapshot& snapshot, Snapshot::TransferLock lock,
      const DeviceBuffer& buffer, std::uint64_t generation,
      std::vector<std::unique_ptr<CopyStream>>& streams, std::size_t depth,
      const CancellationFlag* cancel, const Clock& clock, TransferDone done,
      std::vector<Piece> pieces)
      : engine_(engine),
        direction_(direction),
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
        pieces_(std::move(pieces)) {}

  // Enqueues each stream's first pieces; ends the transfer here when nothing was enqueued.
  void Start() EXCLUDES(mutex_) {
    bool ended = false;
    {
      MutexLock lock(mutex_);
      for (std::size_t round = 0; round < depth_; ++round) {
        for (std::size_t s = 0; s < streams_.size(); ++s) EnqueueNext(s);
      }
      ended = outstanding_ == 0;
    }
    if (ended) End();
  }

 private:
  const char* verb() const { return direction_ == Direction::kToDevice ? "restore" : "checkpoint"; }

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
    const Status enqueued = direction_ == Direction::kToDevice
                                ? stream.CopyToDevice(buffer_, piece.device_offset, piece.host)
                                : stream.CopyToHost(piece.host, buffer_, piece.device_offset);
    if (!enqueued.ok()) {
      status_ = enqueued.WithContext(fmt::format("{} of '{}'", verb(), snapshot_.function_id()));
      return;
    }
    ++next_;
    bytes_ += piece.host.size();
    ++outstanding_;
    stream.Then([self = shared_from_this(), s](Status copied) { self->OnPiece(s, copied); });
  }

  // A piece of stream `s` ended: the stream takes the next one, or the transfer ends.
  void OnPiece(std::size_t s, const Status& copied) EXCLUDES(mutex_) {
    bool ended = false;
    {
      MutexLock lock(mutex_);
      --outstanding_;
      if (!copied.ok() && status_.ok()) {
        status_ = copied.WithContext(fmt::format("{} of '{}'", verb(), snapshot_.function_id()));
      }
      EnqueueNext(s);
      ended = outstanding_ == 0;
    }
    if (ended) End();
  }

  // Every copy enqueued has finished: binds the snapshot on success, lets its lock go, reports.
  void End() EXCLUDES(mutex_) {
    Result<TransferReport> result = Internal("unreachable");
    {
      MutexLock lock(mutex_);
      if (status_.ok()) {
        TransferReport report;
        report.bytes = bytes_;
        report.chunks = next_;
        report.started = start_;
        report.elapsed = clock_.Now() - start_;
        lock_->Bind(buffer_, generation_);
        result = report;
      } else {
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
  const std::vector<Piece> pieces_;
  Mutex mutex_;
  std::size_t next_ GUARDED_BY(mutex_) = 0;         // the next piece to enqueue
  std::size_t outstanding_ GUARDED_BY(mutex_) = 0;  // pieces whose callback has not run
  std::uint64_t bytes_ GUARDED_BY(mutex_) = 0;      // bytes enqueued
  Status status_ GUARDED_BY(mutex_);                // the first error
};

void RestoreEngine::Launch(Direction direction, Snapshot& snapshot, Snapshot::TransferLock lock,
                           const DeviceBuffer& buffer, std::uint64_t generation,
                           std::vector<std::unique_ptr<CopyStream>>& streams,
                           const CancellationFlag* cancel, TransferDone done) {
  // Pieces: the snapshot's chunks, cut so that a small transfer reaches every stream.
  const std::uint64_t count = streams.size();
  constexpr std::uint64_t kPage = 4 * kKiB;
  const std::uint64_t spread =
      ((snapshot.size_bytes() + count - 1) / count + kPage - 1) / kPage * kPage;
  const std::uint64_t piece_bytes = std::max<std::uint64_t>(options_.min_piece_bytes, spread);
  std::vector<Job::Piece> pieces;
  for (std::size_t i = 0; i < snapshot.chunk_count(); ++i) {
    const std::span<std::byte> chunk = snapshot.chunk(i);
    const std::uint64_t offset = snapshot.chunk_offset_bytes(i);
    for (std::uint64_t within = 0; within < chunk.size(); within += piece_bytes) {
      const std::uint64_t n = std::min<std::uint64_t>(piece_bytes, chunk.size() - within);
      pieces.push_back({chunk.subspan(within, n), offset + within});
    }
  }
  {
    MutexLock counted(transfers_mutex_);
    ++transfers_;
  }
  auto job = std::make_shared<Job>(*this, direction, snapshot, std::move(lock), buffer, generation,
                                   streams, static_cast<std::size_t>(options_.in_flight_per_stream),
                                   cancel, clock_, std::move(done), std::move(pieces));
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
  Launch(Direction::kToDevice, snapshot, std::move(lock), destination, generation, *streams, cancel,
         std::move(done));
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
                                           TransferDone done) {
  GSHARE_RETURN_IF_ERROR(CheckImage(source, image_bytes, snapshot));
  GSHARE_ASSIGN_OR_RETURN(auto* streams, StreamsFor(source));
  Snapshot::TransferLock lock(snapshot);
  if (snapshot.Holds(source)) {
    { auto released = std::move(lock); }
    TransferReport report;
    report.skipped = true;
    done(report);
    return Status::Ok();
  }
  // Read before copying: a write that starts during the copy makes the binding stale.
  const std::uint64_t generation = source.write_generation();
  lock.Unbind();
  Launch(Direction::kToHost, snapshot, std::move(lock), source, generation, *streams, cancel,
         std::move(done));
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
                                                 const CancellationFlag* cancel) {
  // Validated before any skip, so that a skip never hides a caller's mistake.
  GSHARE_RETURN_IF_ERROR(StreamsFor(source).status());
  if (source.size_bytes() > snapshot.size_bytes()) {
    return FailedPrecondition(fmt::format(
        "checkpoint of '{}' on {}: device buffer of {} bytes is larger than its snapshot of {} "
        "(the slice grew): make a snapshot of the new size",
        snapshot.function_id(), source.device().info().name, source.size_bytes(),
        snapshot.size_bytes()));
  }
  return CheckpointImage(source, source.size_bytes(), snapshot, cancel);
}

Result<TransferReport> RestoreEngine::CheckpointImage(const DeviceBuffer& source,
                                                      std::uint64_t image_bytes, Snapshot& snapshot,
                                                      const CancellationFlag* cancel) {
  return Wait([&](TransferDone done) {
    return StartCheckpointImage(source, image_bytes, snapshot, cancel, std::move(done));
  });
}

}  // namespace gshare
