#include "gshare/measure/restore_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "gshare/common/random.h"
#include "gshare/device/emulated/copy_calibration.h"
#include "gshare/device/emulated/copy_engine.h"
#include "gshare/device/emulated/emulated_device.h"
#include "gshare/measure/copy_crew.h"
#include "gshare/node/snapshot_store.h"

namespace gshare::measure {
namespace {

double Quantile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(position);
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

Spread Summarize(std::vector<double> gbps) {
  std::sort(gbps.begin(), gbps.end());
  return Spread{Quantile(gbps, 0.5), gbps.front(), Quantile(gbps, 0.25), Quantile(gbps, 0.75),
                gbps.back()};
}

// One timed path of the benchmark: returns how long its copy of the whole size took.
struct Path {
  std::string name;
  std::function<Result<Duration>()> run;
  std::vector<double> gbps;
};

DirectionResult Decide(const std::vector<Path*>& raws, const Path& engine) {
  DirectionResult result;
  for (const Path* raw : raws) {
    const Spread spread = Summarize(raw->gbps);
    result.methods[raw->name] = spread.median;
    if (result.raw_method.empty() || spread.median > result.raw.median) {
      result.raw_method = raw->name;
      result.raw = spread;
    }
  }
  result.engine = Summarize(engine.gbps);
  return result;
}

Result<SizeResult> MeasureSize(GpuInventory& node, RestoreEngine& engine, std::uint64_t size_bytes,
                               std::uint64_t chunk_bytes, int repetitions) {
  Device& device = *node.devices()[0];
  const int threads = engine.options().streams_per_device;
  // The raw host side and the snapshot hold the same random bytes, written (so touched) up front.
  GSHARE_ASSIGN_OR_RETURN(auto host, node.host_memory().Allocate(size_bytes));
  Random random(size_bytes);
  auto* words = reinterpret_cast<std::uint64_t*>(host->bytes().data());
  for (std::uint64_t i = 0; i < size_bytes / 8; ++i) words[i] = random.NextU64();

  const std::uint64_t pool_bytes = (size_bytes + chunk_bytes - 1) / chunk_bytes * chunk_bytes;
  GSHARE_ASSIGN_OR_RETURN(auto store,
                          SnapshotStore::Create(node.host_memory(), {pool_bytes, chunk_bytes}));
  GSHARE_ASSIGN_OR_RETURN(SnapshotRef snapshot, store->Create("bench", size_bytes));
  GSHARE_RETURN_IF_ERROR(snapshot->Write(0, host->bytes()));
  GSHARE_ASSIGN_OR_RETURN(auto buffer, device.Allocate(size_bytes));
  GSHARE_ASSIGN_OR_RETURN(auto raw_stream, device.CreateStream());

  // Direct access to device memory only where it is honest: an unpaced emulated GPU.
  EmulatedBuffer* emulated = nullptr;
  if (device.info().kind == DeviceKind::kEmulated && device.info().link_bytes_per_second <= 0) {
    emulated = dynamic_cast<EmulatedBuffer*>(buffer.get());
  }
  std::byte* host_bytes = host->bytes().data();
  auto timed = [](auto&& copy) -> Result<Duration> {
    const SteadyClock& clock = SteadyClock::Shared();
    const TimePoint begin = clock.Now();
    GSHARE_RETURN_IF_ERROR(copy());
    return clock.Now() - begin;
  };

  std::vector<Path> h2d_raw;
  std::vector<Path> d2h_raw;
  // stream_xS, where there is one: S = 2, the engine's stream count and twice it. A deque, so
  // that each set stays where the timed copies find it.
  std::deque<std::vector<std::unique_ptr<CopyStream>>> stream_sets;
  h2d_raw.push_back(
      {"memcpy", [&] { return device.TimedRawCopyToDevice(*buffer, host->bytes()); }, {}});
  std::unique_ptr<CopyCrew> crew;
  if (emulated != nullptr) {
    GSHARE_ASSIGN_OR_RETURN(crew, CopyCrew::Start(threads));
    std::byte* device_bytes = emulated->bytes().data();
    d2h_raw.push_back({"memcpy",
                       [&, device_bytes] {
                         return timed([&] {
                           std::memcpy(host_bytes, device_bytes, size_bytes);
                           return Status::Ok();
                         });
                       },
                       {}});
    const std::string suffix = fmt::format("_x{}", threads);
    if (threads > 1) {
      h2d_raw.push_back({"memcpy" + suffix,
                         [&, device_bytes] {
                           return Result<Duration>(
                               crew->Copy(device_bytes, host_bytes, size_bytes, PlainMemcpy));
                         },
                         {}});
      d2h_raw.push_back({"memcpy" + suffix,
                         [&, device_bytes] {
                           return Result<Duration>(
                               crew->Copy(host_bytes, device_bytes, size_bytes, PlainMemcpy));
                         },
                         {}});
    }
    h2d_raw.push_back({"copy_engine" + suffix,
                       [&, device_bytes] {
                         return Result<Duration>(
                             crew->Copy(device_bytes, host_bytes, size_bytes, CopyEngineCopy));
                       },
                       {}});
    d2h_raw.push_back({"copy_engine" + suffix,
                       [&, device_bytes] {
                         return Result<Duration>(
                             crew->Copy(host_bytes, device_bytes, size_bytes, CopyEngineCopy));
                       },
                       {}});
  } else {
    d2h_raw.push_back({"stream",
                       [&] {
                         return timed([&] {
                           GSHARE_RETURN_IF_ERROR(
                               raw_stream->CopyToHost(host->bytes(), *buffer, 0));
                           return raw_stream->Synchronize();
                         });
                       },
                       {}});
    std::vector<int> counts = {2, threads, 2 * threads};
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    for (const int count : counts) {
      if (count < 2) continue;
      std::vector<std::unique_ptr<CopyStream>>& streams = stream_sets.emplace_back();
      for (int s = 0; s < count; ++s) {
        GSHARE_ASSIGN_OR_RETURN(auto stream, device.CreateStream());
        streams.push_back(std::move(stream));
      }
      const std::string name = fmt::format("stream_x{}", count);
      StreamPartCopy to_device = [&](CopyStream& stream, std::uint64_t offset,
                                     std::uint64_t bytes) {
        return stream.CopyToDevice(*buffer, offset, host->bytes().subspan(offset, bytes));
      };
      StreamPartCopy to_host = [&](CopyStream& stream, std::uint64_t offset, std::uint64_t bytes) {
        return stream.CopyToHost(host->bytes().subspan(offset, bytes), *buffer, offset);
      };
      h2d_raw.push_back({name,
                         [&, to_device] {
                           return timed(
                               [&] { return CopyOnStreams(streams, size_bytes, to_device); });
                         },
                         {}});
      d2h_raw.push_back({name,
                         [&, to_host] {
                           return timed(
                               [&] { return CopyOnStreams(streams, size_bytes, to_host); });
                         },
                         {}});
    }
  }
  Path restore{
      "restore",
      // Timed from outside the call, as the raw paths are: the caller's wake-up included.
      [&]() -> Result<Duration> {
        return timed([&]() -> Status {
          GSHARE_ASSIGN_OR_RETURN(TransferReport report, engine.Restore(*snapshot, *buffer));
          if (report.bytes != size_bytes) {
            return Internal(fmt::format("restore copied {} of {} bytes", report.bytes, size_bytes));
          }
          return Status::Ok();
        });
      },
      {}};
  Path checkpoint{
      "checkpoint",
      [&]() -> Result<Duration> {
        // As a function run would: the buffer may have changed, so the copy happens. The raw
        // transfer is measured: every byte copied, no digests.
        buffer->MarkWritten();
        return timed([&]() -> Status {
          GSHARE_ASSIGN_OR_RETURN(
              TransferReport report,
              engine.Checkpoint(*buffer, *snapshot, nullptr, {.copy_all = true, .digests = false}));
          if (report.skipped || report.bytes != size_bytes) {
            return Internal(
                fmt::format("checkpoint copied {} of {} bytes", report.bytes, size_bytes));
          }
          return Status::Ok();
        });
      },
      {}};

  Path fast_swap{"fast swap",
                 [&]() -> Result<Duration> {
                   // A full checkpoint records the digests (untimed); then the image, unchanged but
                   // marked written, as a function that cannot say what it wrote reports it.
                   GSHARE_RETURN_IF_ERROR(
                       engine.Checkpoint(*buffer, *snapshot, nullptr, {.copy_all = true}).status());
                   buffer->MarkWritten();
                   return timed([&]() -> Status {
                     GSHARE_ASSIGN_OR_RETURN(TransferReport report,
                                             engine.Checkpoint(*buffer, *snapshot));
                     if (report.bytes != 0 || report.compared_bytes != size_bytes) {
                       return Internal(
                           fmt::format("a checkpoint of an unchanged image copied {} bytes and "
                                       "compared {} of {}",
                                       report.bytes, report.compared_bytes, size_bytes));
                     }
                     return Status::Ok();
                   });
                 },
                 {}};

  std::vector<Path*> paths;
  for (Path& path : h2d_raw) paths.push_back(&path);
  paths.push_back(&restore);
  for (Path& path : d2h_raw) paths.push_back(&path);
  paths.push_back(&checkpoint);
  paths.push_back(&fast_swap);

  // Untimed warm-up of every path: touches every page and settles the caches.
  for (Path* path : paths) {
    GSHARE_RETURN_IF_ERROR(path->run().status().WithContext(path->name));
  }
  const double bytes = static_cast<double>(size_bytes);
  for (int round = 0; round < repetitions; ++round) {
    for (std::size_t k = 0; k < paths.size(); ++k) {
      Path& path = *paths[(k + static_cast<std::size_t>(round)) % paths.size()];
      GSHARE_ASSIGN_OR_RETURN(Duration elapsed, path.run());
      path.gbps.push_back(bytes / std::max(ToSeconds(elapsed), 1e-9) / 1e9);
    }
  }
  std::vector<Path*> h2d;
  std::vector<Path*> d2h;
  for (Path& path : h2d_raw) h2d.push_back(&path);
  for (Path& path : d2h_raw) d2h.push_back(&path);
  return SizeResult{size_bytes, Decide(h2d, restore), Decide(d2h, checkpoint),
                    Summarize(fast_swap.gbps)};
}

}  // namespace

Result<std::unique_ptr<RestoreBench>> RestoreBench::Create(const RestoreBenchOptions& options) {
  if (options.repetitions < kMinRestoreRepetitions || options.streams < 1 ||
      options.in_flight < 1 || options.chunk_bytes == 0) {
    return InvalidArgument(fmt::format(
        "repetitions must be >= {}, streams and chunks in flight >= 1, the chunk positive",
        kMinRestoreRepetitions));
  }
  auto bench = std::unique_ptr<RestoreBench>(new RestoreBench());
  bench->options_ = options;
  GpuInventoryOptions inventory_options;
  inventory_options.devices = options.devices;
  inventory_options.measure_links = false;  // the benchmark measures the raw limit itself
  GSHARE_ASSIGN_OR_RETURN(bench->inventory_, GpuInventory::Open(inventory_options));
  Device& device = *bench->inventory_->devices()[0];
  Device* first[] = {&device};
  GSHARE_ASSIGN_OR_RETURN(
      bench->engine_,
      RestoreEngine::Create(first, RestoreEngineOptions{options.streams, options.in_flight},
                            bench->clock_));
  bench->device_name_ =
      fmt::format("{}: {}", DeviceKindName(device.info().kind), device.info().name);
  if (device.info().kind == DeviceKind::kEmulated) {
    // As a node does at start: the copy engine's routine chosen by measuring both, here on the
    // engine's stream count.
    GSHARE_ASSIGN_OR_RETURN(CopyCalibration calibration,
                            CalibrateCopies({.threads = {std::min(options.streams, 64)},
                                             .piece_bytes = options.chunk_bytes}));
    SetCopyRoutine(calibration.best.routine);
    bench->device_name_ +=
        device.info().link_bytes_per_second > 0
            ? fmt::format(" (paced at {:.1f} GB/s", device.info().link_bytes_per_second / 1e9)
            : fmt::format(" (unpaced");
    bench->device_name_ +=
        fmt::format("; copy engine {}, calibrated: {})", CopyEngineKind(), calibration.Summary());
  }
  return bench;
}

Result<SizeResult> RestoreBench::Measure(std::uint64_t size_bytes) {
  return MeasureSize(*inventory_, *engine_, size_bytes, options_.chunk_bytes, options_.repetitions);
}

}  // namespace gshare::measure
