// gshare bench restore: the restore engine's throughput in both directions against the best raw
// copy the machine can do, measured in the same run (measure/restore_bench.h says how).
//
//   gshare bench restore [--size 512Mi ...] [--device auto|cuda|emulated] [--json]
//
// Sizes: 64 MiB, 512 MiB and 2 GiB unless --size is given. A line per size as it is measured.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/measure/restore_bench.h"

namespace gshare::cli {
namespace {

using measure::kMinRestoreRepetitions;

struct BenchRestoreFlags {
  std::vector<std::string> sizes;
  std::string device = "auto";
  std::string emulated = "1x16Gi";
  std::string link_bandwidth = "0";
  std::string chunk = "8Mi";
  int streams = 4;
  int in_flight = 2;
  int repetitions = kMinRestoreRepetitions;
  bool json = false;
};

nlohmann::json SpreadJson(const measure::Spread& spread) {
  return {{"min", spread.min}, {"q1", spread.q1}, {"q3", spread.q3}, {"max", spread.max}};
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
  if (*chunk % 8 != 0) {
    // The fast swap path compares chunk digests, which start at multiples of 8 bytes.
    std::fprintf(stderr, "gshare bench restore: --chunk %s is not a multiple of 8 bytes\n",
                 flags.chunk.c_str());
    return 2;
  }
  if (flags.repetitions < kMinRestoreRepetitions || flags.streams < 1 || flags.in_flight < 1) {
    std::fprintf(stderr,
                 "gshare bench restore: --repetitions must be >= %d, --streams and --in-flight "
                 ">= 1\n",
                 kMinRestoreRepetitions);
    return 2;
  }
  auto devices = MakeDeviceOptions(flags.device, flags.emulated, flags.link_bandwidth);
  if (!devices.ok()) {
    std::fprintf(stderr, "gshare bench restore: %s\n", devices.status().ToString().c_str());
    return 2;
  }
  measure::RestoreBenchOptions options;
  options.devices = std::move(devices).value();
  options.chunk_bytes = *chunk;
  options.streams = flags.streams;
  options.in_flight = flags.in_flight;
  options.repetitions = flags.repetitions;
  auto bench = measure::RestoreBench::Create(options);
  if (!bench.ok()) {
    std::fprintf(stderr, "gshare bench restore: %s\n", bench.status().ToString().c_str());
    return bench.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (!(*bench)->note().empty()) std::fprintf(stderr, "%s\n", (*bench)->note().c_str());
  const std::string& device_name = (*bench)->device_name();
  if (!flags.json) {
    std::printf("restore benchmark on %s\n", device_name.c_str());
    std::printf(
        "engine: %d streams, %d chunks in flight per stream, %s chunks; median of %d rounds, "
        "[min-max]\n"
        "fast swap: an unchanged image checkpointed by comparing its chunks' digests on the "
        "device, against the full checkpoint (size / time; RATIO is the speed-up)\n\n",
        flags.streams, flags.in_flight, FormatBytes(*chunk).c_str(), flags.repetitions);
    std::printf("%s\n", fmt::format("{:>10}  {:<10}  {:<15}  {:>19}  {:>19}  {:>6}", "SIZE", "PATH",
                                    "RAW METHOD", "RAW GB/s", "ENGINE GB/s", "RATIO")
                            .c_str());
    std::fflush(stdout);
  }
  nlohmann::json results = nlohmann::json::array();
  for (std::uint64_t size : sizes) {
    auto result = (*bench)->Measure(size);
    if (!result.ok()) {
      std::fprintf(stderr, "gshare bench restore: %s: %s\n", FormatBytes(size).c_str(),
                   result.status().ToString().c_str());
      return 1;
    }
    const measure::DirectionResult& in = result->to_device;
    const measure::DirectionResult& out = result->to_host;
    const double ratio = in.engine.median / in.raw.median;
    const double d2h_ratio = out.engine.median / out.raw.median;
    results.push_back(
        {{"size_bytes", size},
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
           {"raw_methods", out.methods}}},
         {"fast_swap",
          {{"effective_gbps", result->fast_swap.median},
           {"spread", SpreadJson(result->fast_swap)},
           {"speedup_over_checkpoint", result->fast_swap.median / out.engine.median}}}});
    if (!flags.json) {
      auto line = [&](const char* path, const measure::DirectionResult& r, double rate_ratio) {
        std::printf("%s\n",
                    fmt::format("{:>10}  {:<10}  {:<15}  {:>6.2f} [{:5.2f}-{:5.2f}]  {:>6.2f} "
                                "[{:5.2f}-{:5.2f}]  {:>6.3f}",
                                FormatBytes(size), path, r.raw_method, r.raw.median, r.raw.min,
                                r.raw.max, r.engine.median, r.engine.min, r.engine.max, rate_ratio)
                        .c_str());
      };
      line("restore", in, ratio);
      line("checkpoint", out, d2h_ratio);
      // The fast swap against the full checkpoint: the ratio is its speed-up.
      const measure::Spread& fast = result->fast_swap;
      std::printf("%s\n",
                  fmt::format("{:>10}  {:<10}  {:<15}  {:>6.2f} [{:5.2f}-{:5.2f}]  {:>6.2f} "
                              "[{:5.2f}-{:5.2f}]  {:>6.2f}x",
                              FormatBytes(size), "fast swap", "checkpoint", out.engine.median,
                              out.engine.min, out.engine.max, fast.median, fast.min, fast.max,
                              fast.median / out.engine.median)
                      .c_str());
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
      ->check(WholeIn(kMinRestoreRepetitions, 1'000))
      ->capture_default_str();
  restore->add_flag("--json", flags->json, "Print JSON");
  restore->callback([flags, &context] { context.exit_code = RunBenchRestore(*flags); });
}

}  // namespace gshare::cli
