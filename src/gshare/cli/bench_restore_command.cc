// gshare bench restore: the restore engine's throughput against the raw copy limit of the link,
// measured in the same run.
//
//   gshare bench restore [--size 512Mi ...] [--device auto|cuda|emulated] [--json]
//
// For each snapshot size (64 MiB, 512 MiB and 2 GiB unless --size is given), on GPU 0:
//   raw      one unchunked copy from pinned host memory into a device buffer (a plain memcpy on
//            an emulated GPU, a pinned cudaMemcpy on a CUDA GPU): the link's limit;
//   restore  the restore engine copying a snapshot of the same size into the same buffer.
// Both sources are pinned host memory holding the same random bytes; both are touched, and each
// measurement run once untimed, before timing, so that page faults are not what is measured.
// The figures are medians of --repetitions runs, raw and restore alternating.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/common/clock.h"
#include "gshare/common/random.h"
#include "gshare/node/gpu_inventory.h"
#include "gshare/node/restore_engine.h"
#include "gshare/node/snapshot_store.h"

namespace gshare::cli {
namespace {

struct BenchRestoreFlags {
  std::vector<std::string> sizes;
  std::string device = "auto";
  std::string emulated = "1x16Gi";
  std::string link_bandwidth = "0";
  std::string chunk = "8Mi";
  int streams = 4;
  int in_flight = 2;
  int repetitions = 5;
  bool json = false;
};

struct SizeResult {
  std::uint64_t size_bytes = 0;
  double raw_bytes_per_second = 0;
  double restore_bytes_per_second = 0;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Result<SizeResult> MeasureSize(GpuInventory& node, RestoreEngine& engine, std::uint64_t size_bytes,
                               std::uint64_t chunk_bytes, int repetitions) {
  Device& device = *node.devices()[0];
  // The raw source and the snapshot hold the same random bytes, written (so touched) up front.
  GSHARE_ASSIGN_OR_RETURN(auto raw_source, node.host_memory().Allocate(size_bytes));
  Random random(size_bytes);
  auto* words = reinterpret_cast<std::uint64_t*>(raw_source->bytes().data());
  for (std::uint64_t i = 0; i < size_bytes / 8; ++i) words[i] = random.NextU64();

  const std::uint64_t pool_bytes = (size_bytes + chunk_bytes - 1) / chunk_bytes * chunk_bytes;
  GSHARE_ASSIGN_OR_RETURN(auto store,
                          SnapshotStore::Create(node.host_memory(), {pool_bytes, chunk_bytes}));
  GSHARE_ASSIGN_OR_RETURN(SnapshotRef snapshot, store->Create("bench", size_bytes));
  GSHARE_RETURN_IF_ERROR(snapshot->Write(0, raw_source->bytes()));
  GSHARE_ASSIGN_OR_RETURN(auto destination, device.Allocate(size_bytes));

  // Untimed warm-up of both paths: touches the destination and settles the caches.
  GSHARE_RETURN_IF_ERROR(device.TimedRawCopyToDevice(*destination, raw_source->bytes()).status());
  GSHARE_RETURN_IF_ERROR(engine.Restore(*snapshot, *destination).status());

  std::vector<double> raw_rates;
  std::vector<double> restore_rates;
  const double bytes = static_cast<double>(size_bytes);
  for (int i = 0; i < repetitions; ++i) {
    GSHARE_ASSIGN_OR_RETURN(Duration raw,
                            device.TimedRawCopyToDevice(*destination, raw_source->bytes()));
    raw_rates.push_back(bytes / std::max(ToSeconds(raw), 1e-9));
    GSHARE_ASSIGN_OR_RETURN(TransferReport restore, engine.Restore(*snapshot, *destination));
    if (restore.bytes != size_bytes) {
      return Internal(fmt::format("restore copied {} of {} bytes", restore.bytes, size_bytes));
    }
    restore_rates.push_back(bytes / std::max(ToSeconds(restore.elapsed), 1e-9));
  }
  return SizeResult{size_bytes, Median(raw_rates), Median(restore_rates)};
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
  if (flags.repetitions < 1 || flags.streams < 1 || flags.in_flight < 1) {
    std::fprintf(stderr,
                 "gshare bench restore: --repetitions, --streams and --in-flight must be >= 1\n");
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
            : " (unpaced)";
  }
  if (!flags.json) {
    std::printf("restore benchmark on %s\n", device_name.c_str());
    std::printf("engine: %d streams, %d chunks in flight per stream, %s chunks; median of %d\n\n",
                flags.streams, flags.in_flight, FormatBytes(*chunk).c_str(), flags.repetitions);
    std::printf("%s\n", fmt::format("{:>10}  {:>9}  {:>13}  {:>6}  {:>10}  {:>10}", "SIZE",
                                    "RAW GB/s", "RESTORE GB/s", "RATIO", "RAW ms", "RESTORE ms")
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
    const double raw_gbps = result->raw_bytes_per_second / 1e9;
    const double restore_gbps = result->restore_bytes_per_second / 1e9;
    const double ratio = restore_gbps / raw_gbps;
    results.push_back({{"size_bytes", size},
                       {"raw_gbps", raw_gbps},
                       {"restore_gbps", restore_gbps},
                       {"ratio", ratio}});
    if (!flags.json) {
      const double bytes = static_cast<double>(size);
      std::printf("%s\n", fmt::format("{:>10}  {:>9.2f}  {:>13.2f}  {:>6.3f}  {:>10.2f}  {:>10.2f}",
                                      FormatBytes(size), raw_gbps, restore_gbps, ratio,
                                      bytes / result->raw_bytes_per_second * 1e3,
                                      bytes / result->restore_bytes_per_second * 1e3)
                              .c_str());
      std::fflush(stdout);
    }
  }
  if (flags.json) {
    nlohmann::json out = {{"device", device_name}, {"results", results}};
    std::printf("%s\n", out.dump(2).c_str());
  }
  return 0;
}

}  // namespace

void AddBenchRestoreCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchRestoreFlags>();
  CLI::App* restore = bench.add_subcommand(
      "restore", "Restore engine throughput against the raw copy limit, measured in one run");
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
  restore->add_option("--repetitions", flags->repetitions, "Timed runs per size (median)")
      ->check(WholeIn(1, 1'000))
      ->capture_default_str();
  restore->add_flag("--json", flags->json, "Print JSON");
  restore->callback([flags, &context] { context.exit_code = RunBenchRestore(*flags); });
}

}  // namespace gshare::cli
