#include "gshare/node/restore_engine.h"

#include <fmt/format.h>

#include <deque>
#include <utility>

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

RestoreEngine::~RestoreEngine() = default;

Result<std::vector<std::unique_ptr<CopyStream>>*> RestoreEngine::StreamsFor(
    const DeviceBuffer& buffer) {
  for (auto& entry : devices_) {
    if (entry.device == &buffer.device()) return &entry.streams;
  }
  return InvalidArgument(
      fmt::format("the restore engine does not drive {}", buffer.device().info().name));
}

Result<TransferReport> RestoreEngine::Restore(Snapshot& snapshot, DeviceBuffer& destination,
                                              const CancellationFlag* cancel) {
  GSHARE_RETURN_IF_ERROR(StreamsFor(destination).status());
  if (destination.size_bytes() < snapshot.size_bytes()) {
    return OutOfRange(fmt::format("restore of '{}' on {}: buffer of {} bytes, snapshot of {}",
                                  snapshot.function_id(), destination.device().info().name,
                                  destination.size_bytes(), snapshot.size_bytes()));
  }
  Snapshot::TransferLock transfer(snapshot);
  // From here on the buffer's contents change: no snapshot holds it any more, this one included,
  // until the copy has succeeded.
  const std::uint64_t generation = destination.MarkWritten();
  GSHARE_ASSIGN_OR_RETURN(TransferReport report,
                          Transfer(Direction::kToDevice, snapshot, destination, cancel));
  transfer.Bind(destination, generation);
  return report;
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
  GSHARE_RETURN_IF_ERROR(StreamsFor(source).status());
  if (image_bytes > source.size_bytes() || image_bytes != snapshot.size_bytes()) {
    return OutOfRange(fmt::format(
        "checkpoint of '{}' on {}: an image of {} bytes of a {}-byte buffer into a snapshot of {}",
        snapshot.function_id(), source.device().info().name, image_bytes, source.size_bytes(),
        snapshot.size_bytes()));
  }
  Snapshot::TransferLock transfer(snapshot);
  if (snapshot.Holds(source)) {
    TransferReport report;
    report.skipped = true;
    return report;
  }
  // Read before copying: a write that starts during the copy makes the binding stale.
  const std::uint64_t generation = source.write_generation();
  transfer.Unbind();
  GSHARE_ASSIGN_OR_RETURN(TransferReport report,
                          Transfer(Direction::kToHost, snapshot, source, cancel));
  transfer.Bind(source, generation);
  return report;
}

Result<TransferReport> RestoreEngine::Transfer(Direction direction, Snapshot& snapshot,
                                               const DeviceBuffer& buffer,
                                               const CancellationFlag* cancel) {
  const char* verb = direction == Direction::kToDevice ? "restore" : "checkpoint";
  GSHARE_ASSIGN_OR_RETURN(auto* streams, StreamsFor(buffer));

  const TimePoint start = clock_.Now();
  const std::size_t stream_count = streams->size();
  const std::size_t depth = static_cast<std::size_t>(options_.in_flight_per_stream);
  std::vector<std::deque<CopyCompletion>> pending(stream_count);
  // Streams with a copy enqueued after their last recorded completion: only Synchronize can wait
  // for it.
  std::vector<bool> uncovered(stream_count, false);
  Status status;
  std::uint64_t bytes_enqueued = 0;
  std::size_t chunks = 0;
  // The buffer is const for a checkpoint; a restore was handed a mutable one.
  auto& mutable_buffer = const_cast<DeviceBuffer&>(buffer);

  for (std::size_t i = 0; i < snapshot.chunk_count(); ++i) {
    if (cancel != nullptr && cancel->cancelled()) {
      status = Cancelled(fmt::format("{} of '{}' on {} cancelled after {} of {} bytes", verb,
                                     snapshot.function_id(), buffer.device().info().name,
                                     bytes_enqueued, snapshot.size_bytes()));
      break;
    }
    const std::size_t s = i % stream_count;
    CopyStream& stream = *(*streams)[s];
    if (pending[s].size() >= depth) {
      status = pending[s].front().Wait();
      pending[s].pop_front();
      if (!status.ok()) break;
    }
    const std::span<std::byte> chunk = snapshot.chunk(i);
    const std::uint64_t offset = snapshot.chunk_offset_bytes(i);
    status = direction == Direction::kToDevice ? stream.CopyToDevice(mutable_buffer, offset, chunk)
                                               : stream.CopyToHost(chunk, buffer, offset);
    if (!status.ok()) break;
    uncovered[s] = true;
    bytes_enqueued += chunk.size();
    ++chunks;
    auto completion = stream.Record();
    if (!completion.ok()) {
      status =
          completion.status().WithContext(fmt::format("{} of '{}'", verb, snapshot.function_id()));
      break;
    }
    uncovered[s] = false;
    pending[s].push_back(std::move(completion).value());
  }
  // Wait for every copy in flight, even after an error: the caller may free the buffers.
  for (std::size_t s = 0; s < stream_count; ++s) {
    for (const CopyCompletion& completion : pending[s]) {
      Status waited = completion.Wait();
      if (status.ok() && !waited.ok()) status = waited;
    }
    if (uncovered[s]) {
      // Synchronize waits for the stream's copies even when it reports an error.
      Status synchronized = (*streams)[s]->Synchronize();
      if (status.ok() && !synchronized.ok()) status = synchronized;
    }
  }
  if (!status.ok()) return status;

  TransferReport report;
  report.bytes = bytes_enqueued;
  report.chunks = chunks;
  report.elapsed = clock_.Now() - start;
  return report;
}

}  // namespace gshare
