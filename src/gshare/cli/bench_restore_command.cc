// gshare bench restore: the restore engine's throughput in both directions against the best raw
// copy the machine can do, measured in the same run.
//
//   gshare bench restore [--size 512Mi ...] [--device auto|cuda|emulated] [--json]
//
// For each snapshot size (64 MiB, 512 MiB and 2 GiB unless --size is given), on GPU 0:
//   raw         host to device: every raw method below, each one unchunked copy of the whole
//               size; "raw" is the method with the best median, so the engine is compared with
//               the best the machine did in this run:
//                 memcpy             Device::TimedRawCopyToDevice: one plain memcpy on an emulated
//                                    GPU (paced when the link is), a pinned cudaMemcpy on CUDA;
//                 memcpy_xS          (unpaced emulated GPUs) memcpy on S threads, S = the engine's
//                                    streams, each copying one contiguous S-th of the bytes; the
//                                    threads are started once per size and kept, as the engine
//                                    keeps its stream threads;
//                 copy_engine_xS     (unpaced emulated GPUs) the same with the emulated copy
//                                    engine's own routine (CopyEngineCopy, non-temporal stores);
//                 stream_xS          (CUDA, paced emulated links: where the host cannot reach the
//                                    device memory) S copy streams of the device, created once
//                                    per size, each copying one contiguous S-th of the bytes,
//                                    timed until every stream is synchronized; for S = 2, the
//                                    engine's stream count and twice it.
//   restore     the restore engine copying a snapshot of the same size into the same buffer;
//   d2h raw     device to host, the same methods the other way; where memcpy cannot reach the
//               device memory (CUDA, paced emulated links) "stream" replaces it: one unchunked
//               copy on one copy stream of the device (and stream_xS as above);
//   checkpoint  the restore engine copying the buffer into the snapshot (the buffer is marked
//               written before each run, so the checkpoint always copies).
// Host sides are pinned host memory holding the same random bytes, written before timing; every
// path runs once untimed first, so that page faults are not what is measured. Each of the
// --repetitions (at least 11) rounds runs every path once, starting at a different path each
// round; the figures are medians, with min, quartiles and max as the spread.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/copy_crew.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/common/clock.h"
#include "gshare/common/mutex.h"
#include "gshare/common/random.h"
#include "gshare/device/emulated/copy_engine.h"
#include "gshare/device/emulated/emulated_device.h"
#include "gshare/node/gpu_inventory.h"
#include "gshare/node/restore_engine.h"
#include "gshare/node/snapshot_store.h"

namespace gshare::cli {
namespace {

constexpr int kMinRepetitions = 11;

struct BenchRestoreFlags {
  std::vector<std::string> sizes;
  std::string device = "auto";
  std::string emulated = "1x16Gi";
  std::string link_bandwidth = "0";
  std::string chunk = "8Mi";
  int streams = 4;
  int in_flight = 2;
  int repetitions = kMinRepetitions;
  bool json = false;
};

// Order statistics of one path's rates, in GB/s (10^9 bytes per second).
struct Spread {
  double median = 0;
  double min = 0;
  double q1 = 0;
  double q3 = 0;
  double max = 0;
};

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

nlohmann::json SpreadJson(const Spread& spread) {
  return {{"min", spread.min}, {"q1", spread.q1}, {"q3", spread.q3}, {"max", spread.max}};
}

// One timed path of the benchmark: returns how long its copy of the whole size took.
struct Path {
  std::string name;
  std::function<Result<Duration>()> run;
  std::vector<double> gbps;
};

struct DirectionResult {
  std::string raw_method;
  Spread raw;
  Spread engine;
  nlohmann::json methods = nlohmann::json::object();  // method: median GB/s
};

struct SizeResult {
  std::uint64_t size_bytes = 0;
  DirectionResult to_device;  // raw vs restore
  DirectionResult to_host;    // raw vs checkpoint
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

// Enqueues one part of a copy on a stream: (stream, offset, bytes), the same offset on both sides.
using StreamPartCopy = std::function<Status(CopyStream&, std::uint64_t, std::uint64_t)>;

// Cuts `size_bytes` into one contiguous part per stream (4 KiB aligned, the last one shorter),
// enqueues `copy` of each part on its stream, then synchronizes every stream, even after an error.
Status CopyOnStreams(const std::vector<std::unique_ptr<CopyStream>>& streams,
                     std::uint64_t size_bytes, const StreamPartCopy& copy) {
  constexpr std::uint64_t kAlign = 4 * kKiB;
  const std::uint64_t count = streams.size();
  const std::uint64_t part = ((size_bytes + count - 1) / count + kAlign - 1) / kAlign * kAlign;
  Status status = Status::Ok();
  for (std::uint64_t i = 0; i < count && status.ok(); ++i) {
    const std::uint64_t offset = i * part;
    if (offset >= size_bytes) break;
    status = copy(*streams[i], offset, std::min(part, size_bytes - offset));
  }
  for (const auto& stream : streams) {
    Status synchronized = stream->Synchronize();
    if (status.ok()) status = std::move(synchronized);
  }
  return status;
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
    const auto begin = std::chrono::steady_clock::now();
    GSHARE_RETURN_IF_ERROR(copy());
    return std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - begin);
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
      [&]() -> Result<Duration> {
        GSHARE_ASSIGN_OR_RETURN(TransferReport report, engine.Restore(*snapshot, *buffer));
        if (report.bytes != size_bytes) {
          return Internal(fmt::format("restore copied {} of {} bytes", report.bytes, size_bytes));
        }
        return report.elapsed;
      },
      {}};
  Path checkpoint{
      "checkpoint",
      [&]() -> Result<Duration> {
        // As a function run would: the buffer may have changed, so the copy happens.
        buffer->MarkWritten();
        GSHARE_ASSIGN_OR_RETURN(TransferReport report, engine.Checkpoint(*buffer, *snapshot));
        if (report.skipped || report.bytes != size_bytes) {
          return Internal(
              fmt::format("checkpoint copied {} of {} bytes", report.bytes, size_bytes));
        }
        return report.elapsed;
      },
      {}};

  std::vector<Path*> paths;
  for (Path& path : h2d_raw) paths.push_back(&path);
  paths.push_back(&restore);
  for (Path& path : d2h_raw) paths.push_back(&path);
  paths.push_back(&checkpoint);

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
  return SizeResult{size_bytes, Decide(h2d, restore), Decide(d2h, checkpoint)};
}

int RunBenchRestore(const BenchRestoreFlags& flags) {
  std::vector<std::uint64_t> sizes;
  if (flags.sizes.empty()) {
    sizes = {64 * kMiB, 512 * kMiB, 2 * kGiB};
  } else {
    for (const std::string& text : flags.sizes) {
      auto size = ParseBytes(text);
      if (!size.ok() || *size == 0) {
        std::fprintf(stderr, "gshare bench restore: --size '%s': %s\n", text.c_str(),
                     size.ok() ? "must be positive" : size.status().ToString().c_str());
        return 2;
      }
      sizes.push_back(*size);
    }
  }
  auto chunk = ParseBytes(flags.chunk);
  if (!chunk.ok() || *chunk == 0) {
    std::fprintf(stderr, "gshare bench restore: --chunk '%s' is not a positive size\n",
                 flags.chunk.c_str());
    return 2;
  }
  if (flags.repetitions < kMinRepetitions || flags.streams < 1 || flags.in_flight < 1) {
    std::fprintf(stderr,
                 "gshare bench restore: --repetitions must be >= %d, --streams and --in-flight "
                 ">= 1\n",
                 kMinRepetitions);
    return 2;
  }
  auto devices = MakeDeviceOptions(flags.device, flags.emulated, flags.link_bandwidth);
  if (!devices.ok()) {
    std::fprintf(stderr, "gshare bench restore: %s\n", devices.status().ToString().c_str());
    return 2;
  }
  GpuInventoryOptions options;
  options.devices = std::move(devices).value();
  options.measure_links = false;  // the benchmark measures the raw limit itself
  auto inventory = GpuInventory::Open(options);
  if (!inventory.ok()) {
    std::fprintf(stderr, "gshare bench restore: %s\n", inventory.status().ToString().c_str());
    return 1;
  }
  GpuInventory& node = **inventory;
  if (!node.note().empty()) std::fprintf(stderr, "%s\n", node.note().c_str());
  Device& device = *node.devices()[0];

  SteadyClock clock;
  Device* first[] = {&device};
  auto engine =
      RestoreEngine::Create(first, RestoreEngineOptions{flags.streams, flags.in_flight}, clock);
  if (!engine.ok()) {
    std::fprintf(stderr, "gshare bench restore: %s\n", engine.status().ToString().c_str());
    return 1;
  }

  std::string device_name =
      fmt::format("{}: {}", DeviceKindName(device.info().kind), device.info().name);
  if (device.info().kind == DeviceKind::kEmulated) {
    device_name +=
        device.info().link_bytes_per_second > 0
            ? fmt::format(" (paced at {:.1f} GB/s)", device.info().link_bytes_per_second / 1e9)
            : fmt::format(" (unpaced, copy engine {})", CopyEngineKind());
  }
  if (!flags.json) {
    std::printf("restore benchmark on %s\n", device_name.c_str());
    std::printf(
        "engine: %d streams, %d chunks in flight per stream, %s chunks; median of %d rounds, "
        "[min-max]\n\n",
        flags.streams, flags.in_flight, FormatBytes(*chunk).c_str(), flags.repetitions);
    std::printf("%s\n", fmt::format("{:>10}  {:<10}  {:<15}  {:>19}  {:>19}  {:>6}", "SIZE", "PATH",
                                    "RAW METHOD", "RAW GB/s", "ENGINE GB/s", "RATIO")
                            .c_str());
    std::fflush(stdout);
  }
  nlohmann::json results = nlohmann::json::array();
  for (std::uint64_t size : sizes) {
    auto result = MeasureSize(node, **engine, size, *chunk, flags.repetitions);
    if (!result.ok()) {
      std::fprintf(stderr, "gshare bench restore: %s: %s\n", FormatBytes(size).c_str(),
                   result.status().ToString().c_str());
      return 1;
    }
    const DirectionResult& in = result->to_device;
    const DirectionResult& out = result->to_host;
    const double ratio = in.engine.median / in.raw.median;
    const double d2h_ratio = out.engine.median / out.raw.median;
    results.push_back({{"size_bytes", size},
                       {"raw_gbps", in.raw.median},
                       {"restore_gbps", in.engine.median},
                       {"ratio", ratio},
                       {"raw_method", in.raw_method},
                       {"raw_spread", SpreadJson(in.raw)},
                       {"restore_spread", SpreadJson(in.engine)},
                       {"raw_methods", in.methods},
                       {"d2h",
                        {{"raw_gbps", out.raw.median},
                         {"checkpoint_gbps", out.engine.median},
                         {"ratio", d2h_ratio},
                         {"raw_method", out.raw_method},
                         {"raw_spread", SpreadJson(out.raw)},
                         {"checkpoint_spread", SpreadJson(out.engine)},
                         {"raw_methods", out.methods}}}});
    if (!flags.json) {
      auto line = [&](const char* path, const DirectionResult& r, double rate_ratio) {
        std::printf("%s\n",
                    fmt::format("{:>10}  {:<10}  {:<15}  {:>6.2f} [{:5.2f}-{:5.2f}]  {:>6.2f} "
                                "[{:5.2f}-{:5.2f}]  {:>6.3f}",
                                FormatBytes(size), path, r.raw_method, r.raw.median, r.raw.min,
                                r.raw.max, r.engine.median, r.engine.min, r.engine.max, rate_ratio)
                        .c_str());
      };
      line("restore", in, ratio);
      line("checkpoint", out, d2h_ratio);
      std::fflush(stdout);
    }
  }
  if (flags.json) {
    nlohmann::json out = {
        {"device", device_name}, {"streams", flags.streams},         {"in_flight", flags.in_flight},
        {"chunk_bytes", *chunk}, {"repetitions", flags.repetitions}, {"results", results}};
    std::printf("%s\n", out.dump(2).c_str());
  }
  return 0;
}

}  // namespace

void AddBenchRestoreCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchRestoreFlags>();
  CLI::App* restore = bench.add_subcommand(
      "restore",
      "Restore engine throughput, both directions, against the best raw copy of the same run");
  restore->add_option("--size", flags->sizes,
                      "Snapshot size(s), e.g. 512Mi (repeatable; default 64Mi, 512Mi and 2Gi)");
  restore->add_option("--device", flags->device, "auto, cuda or emulated")->capture_default_str();
  restore->add_option("--emulated", flags->emulated, "Emulated GPUs when they are used")
      ->capture_default_str();
  restore
      ->add_option("--link-bandwidth", flags->link_bandwidth,
                   "Link speed of emulated GPUs, e.g. 12GB/s; 0 runs copies unpaced")
      ->capture_default_str();
  restore->add_option("--chunk", flags->chunk, "Snapshot chunk size")->capture_default_str();
  restore->add_option("--streams", flags->streams, "Copy streams of the restore engine")
      ->check(WholeIn(1, 64))
      ->capture_default_str();
  restore->add_option("--in-flight", flags->in_flight, "Chunks in flight per stream")
      ->check(WholeIn(1, 64))
      ->capture_default_str();
  restore
      ->add_option("--repetitions", flags->repetitions,
                   "Timed rounds per size (median and spread; at least 11)")
      ->check(WholeIn(kMinRepetitions, 1'000))
      ->capture_default_str();
  restore->add_flag("--json", flags->json, "Print JSON");
  restore->callback([flags, &context] { context.exit_code = RunBenchRestore(*flags); });
}

}  // namespace gshare::cli
