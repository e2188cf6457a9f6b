// gshare bench switch: switching each example function between host memory and emulated GPUs,
// against the raw copy limit measured in the same run.
//
//   gshare bench switch [--json] [--repetitions 11] [--link-bandwidth 0] [--weights DIR]
//
// For each example function (mlp, cnn, echo), on a node of two emulated GPUs: the function runs
// in this process on the function library, exactly as a function process does (its device memory
// at a fixed address, its kernels under the node's compute grants); the node side is the
// ChannelSwitch and the restore engine.
//   checkpoint  lock, copy the function's image into its host snapshot (a copy is forced: no fast
//               swap), unmap: from the call to its completion on the node's event loop;
//   restore     copy the snapshot onto the other GPU, map it back at the same addresses, unlock;
//   raw         the image's bytes copied by the best raw method of this machine, timed the same
//               way (docs/node.md, "bench restore"): what a restore cannot beat;
//   outputs_identical  whether an inference after the last restore (onto another GPU than the
//               first) answers exactly the bytes it answered before the first checkpoint.
// Figures are medians over --repetitions rounds, after one untimed round.
#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "examples/runtime/example_weights.h"
#include "examples/runtime/model_function.h"
#include "examples/runtime/output_checker.h"
#include "gshare/cli/bench_stats.h"
#include "gshare/cli/commands.h"
#include "gshare/cli/copy_crew.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/device/device_registry.h"
#include "gshare/device/emulated/copy_engine.h"
#include "gshare/node/live_node.h"
#include "gshare/node/switch/channel_switch.h"

namespace gshare::cli {
namespace {

struct BenchSwitchFlags {
  std::string link_bandwidth = "0";
  std::string weights_dir;
  int repetitions = 11;
  bool json = false;
};

struct SwitchResult {
  std::string function;
  std::uint64_t model_bytes = 0;
  double checkpoint_ms = 0;
  double restore_ms = 0;
  double raw_ms = 0;
  bool outputs_identical = false;
};

// Runs on the node's loop thread (LiveNode::StartLoopThread).
class Bench {
 public:
  explicit Bench(LiveNode& node) : node_(node) {}

  // Runs `start` on the loop with a Done callback and returns its status and wall time.
  template <typename Start>
  std::pair<Status, double> Timed(Start start) {
    // Shared promises here: the loop may still be inside set_value when this thread wakes.
    auto done = std::make_shared<std::promise<Status>>();
    auto result = done->get_future();
    const TimePoint begin = node_.clock().Now();
    boost::asio::post(node_.loop(),
                      [&start, done] { start([done](Status s) { done->set_value(s); }); });
    Status status = result.get();
    return {status, ToSeconds(node_.clock().Now() - begin) * 1e3};
  }

  Result<SwitchResult> Measure(const std::string& model, const std::string& weights_dir,
                               examples::OutputChecker& checker, int repetitions) {
    SwitchResult result;
    result.function = model;
    auto pair = fn::ControlChannel::CreatePair();
    if (!pair.ok()) return pair.status();
    ComputeArbiter arbiters[2];  // outlives the switch, which withdraws from it when destroyed
    std::shared_ptr<ChannelSwitch> instance;
    auto created = std::make_shared<std::promise<void>>();
    auto made = created->get_future();
    boost::asio::post(node_.loop(), [&, created] {
      instance =
          ChannelSwitch::Create(node_.switch_context(), "bench-" + model, std::move(pair->first));
      created->set_value();
    });
    made.get();
    // Whatever way this returns, the switch is closed and dropped on the loop, its thread.
    struct CloseOnLoop {
      boost::asio::io_context& loop;
      std::shared_ptr<ChannelSwitch>& instance;
      ~CloseOnLoop() { Close(); }
      void Close() {
        auto closed = std::make_shared<std::promise<void>>();
        auto done = closed->get_future();
        boost::asio::post(loop, [this, closed] {
          if (instance) instance->Close();
          instance.reset();
          closed->set_value();
        });
        done.get();
      }
    } close_on_loop{node_.loop(), instance};

    // The function, on a thread of its own while it connects (Connect waits for the first map).
    const std::uintptr_t base = fn::kDefaultDeviceBase + next_range_++ * kReserve;
    std::promise<Result<std::unique_ptr<fn::FunctionRuntime>>> connected;
    std::thread connecting([&, control = std::move(pair->second)]() mutable {
      connected.set_value(fn::FunctionRuntime::Connect(std::move(control), base, kReserve,
                                                       {.exit_when_node_gone = false}));
    });
    std::vector<Device*> gpus(node_.resources().devices.begin(), node_.resources().devices.end());
    auto first = gpus[0]->Allocate(kSliceBytes);
    if (!first.ok()) {
      connecting.join();
      return first.status();
    }
    std::unique_ptr<DeviceBuffer> slice = std::move(first).value();
    auto attached = Timed([&](ChannelSwitch::Done done) {
      instance->Attach(*slice, kSliceBytes, &arbiters[0], std::move(done));
    });
    connecting.join();
    auto runtime = connected.get_future().get();
    if (!attached.first.ok()) return attached.first;
    if (!runtime.ok()) return runtime.status();
    const std::string weights = model == "echo" ? "" : weights_dir + "/" + model + ".safetensors";
    auto function = examples::ModelFunction::Create(**runtime, model, weights);
    if (!function.ok()) return function.status();
    auto input = checker.InputFor(model, 0);
    if (!input.ok()) return input.status();
    auto before = (*function)->Infer(*input);
    if (!before.ok()) return before.status();

    std::vector<double> checkpoints, restores;
    int gpu = 0;
    // Every round's slice made up front and its pages faulted in: device memory that exists, as
    // a GPU's does, so that the host's page faults are not what is timed.
    std::vector<std::unique_ptr<DeviceBuffer>> slices;
    for (int round = 0; round <= repetitions; ++round) {
      auto next = gpus[static_cast<std::size_t>(1 - round % 2)]->Allocate(kSliceBytes);
      if (!next.ok()) return next.status();
      auto& emulated = dynamic_cast<EmulatedBuffer&>(**next);
      std::fill(emulated.bytes().begin(), emulated.bytes().end(), std::byte{0});
      slices.push_back(std::move(next).value());
    }
    for (int round = 0; round <= repetitions; ++round) {
      auto [out, checkpoint_ms] = Timed([&](ChannelSwitch::Done done) {
        instance->Checkpoint(/*force_copy=*/true, std::move(done));
      });
      if (!out.ok()) return out;
      slice = std::move(slices[static_cast<std::size_t>(round)]);
      gpu = 1 - gpu;
      auto [in, restore_ms] = Timed([&](ChannelSwitch::Done done) {
        instance->Restore(*slice, kSliceBytes, &arbiters[gpu], std::move(done));
      });
      if (!in.ok()) return in;
      if (round == 0) continue;  // untimed: first touches
      checkpoints.push_back(checkpoint_ms);
      restores.push_back(restore_ms);
    }
    result.model_bytes = instance->last_restore().bytes;
    result.checkpoint_ms = Median(checkpoints);
    result.restore_ms = Median(restores);
    auto after = (*function)->Infer(*input);
    if (!after.ok()) return after.status();
    result.outputs_identical = *after == *before;

    // The raw limit, in the same run: the image's bytes, host to the GPU it is on now.
    auto raw =
        RawMilliseconds(*gpus[static_cast<std::size_t>(gpu)], result.model_bytes, repetitions);
    if (!raw.ok()) return raw.status();
    result.raw_ms = *raw;

    // The node lets the instance go before the function ends, so its end is no failure.
    close_on_loop.Close();
    function->reset();
    runtime->reset();
    return result;
  }

 private:
  static constexpr std::uint64_t kReserve = 1ULL << 30;
  static constexpr std::uint64_t kSliceBytes = 64ULL << 20;

  // The best raw method's median, in the same run: one plain memcpy (the device's raw copy),
  // and on an unpaced emulated GPU also memcpy and the copy engine's routine on as many threads
  // as the restore engine has streams (as bench restore measures raw).
  Result<double> RawMilliseconds(Device& gpu, std::uint64_t bytes, int repetitions) {
    if (bytes == 0) return 0.0;
    auto host = node_.inventory().host_memory().Allocate(bytes);
    if (!host.ok()) return host.status();
    std::fill((*host)->bytes().begin(), (*host)->bytes().end(), std::byte{0x5a});
    auto buffer = gpu.Allocate(bytes);
    if (!buffer.ok()) return buffer.status();
    std::vector<std::function<Result<Duration>()>> methods;
    methods.push_back([&] { return gpu.TimedRawCopyToDevice(**buffer, (*host)->bytes()); });
    std::unique_ptr<CopyCrew> crew;
    auto* emulated = dynamic_cast<EmulatedBuffer*>(buffer->get());
    if (emulated != nullptr && gpu.info().link_bytes_per_second <= 0) {
      auto started = CopyCrew::Start(node_.resources().engine.options().streams_per_device);
      if (!started.ok()) return started.status();
      crew = std::move(started).value();
      for (const CopyCrew::CopyFunction copy : {&PlainMemcpy, &CopyEngineCopy}) {
        methods.push_back([&, copy]() -> Result<Duration> {
          return crew->Copy(emulated->bytes().data(), (*host)->bytes().data(), bytes, copy);
        });
      }
    }
    double best = 0;
    for (auto& method : methods) {
      std::vector<double> times;
      for (int round = 0; round <= repetitions; ++round) {
        auto took = method();
        if (!took.ok()) return took.status();
        if (round > 0) times.push_back(ToSeconds(*took) * 1e3);
      }
      const double median = Median(times);
      if (best == 0 || median < best) best = median;
    }
    return best;
  }

  LiveNode& node_;
  std::uint64_t next_range_ = 0;
};

int RunBenchSwitch(const BenchSwitchFlags& flags) {
  auto devices = MakeDeviceOptions("emulated", "2x16Gi", flags.link_bandwidth);
  if (!devices.ok()) {
    std::fprintf(stderr, "gshare bench switch: %s\n", devices.status().ToString().c_str());
    return 2;
  }
  LiveNodeOptions options;
  options.devices = std::move(devices).value();
  options.snapshot_pool_bytes = 256 * kMiB;
  options.prepared_bytes_per_gpu = 0;  // the bench faults its slices in itself, before timing
  options.policy = "";                 // it switches one function itself
  auto node = LiveNode::Create(std::move(options));
  if (!node.ok()) {
    std::fprintf(stderr, "gshare bench switch: %s\n", node.status().ToString().c_str());
    return 1;
  }
  std::string weights_dir = flags.weights_dir;
  std::filesystem::path scratch;
  if (weights_dir.empty()) {  // the bundled seed's weights, in a scratch folder
    scratch = std::filesystem::temp_directory_path() / fmt::format("gshare-bench-{}", ::getpid());
    std::filesystem::create_directories(scratch);
    weights_dir = scratch.string();
    if (auto written = examples::EnsureExampleWeights(scratch); !written.ok()) {
      std::fprintf(stderr, "gshare bench switch: %s\n", written.status().ToString().c_str());
      return 1;
    }
  }
  auto checker = examples::OutputChecker::Create(weights_dir);
  if (!checker.ok()) {
    std::fprintf(stderr, "gshare bench switch: %s\n", checker.status().ToString().c_str());
    return 1;
  }
  std::vector<SwitchResult> results;
  {
    (*node)->StartLoopThread();
    Bench bench(**node);
    for (const std::string model : {"mlp", "cnn", "echo"}) {
      auto result = bench.Measure(model, weights_dir, **checker, flags.repetitions);
      if (!result.ok()) {
        std::fprintf(stderr, "gshare bench switch: %s: %s\n", model.c_str(),
                     result.status().ToString().c_str());
        return 1;
      }
      results.push_back(*result);
    }
  }
  if (!scratch.empty()) std::filesystem::remove_all(scratch);

  if (flags.json) {
    nlohmann::json out = {{"results", nlohmann::json::array()}};
    for (const SwitchResult& r : results) {
      out["results"].push_back({{"function", r.function},
                                {"model_bytes", r.model_bytes},
                                {"checkpoint_ms", r.checkpoint_ms},
                                {"restore_ms", r.restore_ms},
                                {"raw_ms", r.raw_ms},
                                {"outputs_identical", r.outputs_identical}});
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%-6s %12s %14s %12s %10s %16s %10s\n", "func", "image", "checkpoint ms",
                "restore ms", "raw ms", "restore / raw", "identical");
    for (const SwitchResult& r : results) {
      std::printf("%-6s %12s %14.3f %12.3f %10.3f %16.2f %10s\n", r.function.c_str(),
                  FormatBytes(r.model_bytes).c_str(), r.checkpoint_ms, r.restore_ms, r.raw_ms,
                  r.raw_ms > 0 ? r.restore_ms / r.raw_ms : 0.0, r.outputs_identical ? "yes" : "NO");
    }
  }
  for (const SwitchResult& r : results) {
    if (!r.outputs_identical) {
      std::fprintf(stderr, "gshare bench switch: %s answered differently after its restore\n",
                   r.function.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

void AddBenchSwitchCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchSwitchFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "switch", "Checkpoint and restore of each example function against the raw copy limit");
  cmd->add_option("--repetitions", flags->repetitions, "Timed rounds (after one untimed)")
      ->check(WholeIn(1, 1000))
      ->capture_default_str();
  cmd->add_option("--link-bandwidth", flags->link_bandwidth,
                  "Pace the emulated links (\"12GB/s\"); 0: unpaced")
      ->capture_default_str();
  cmd->add_option("--weights", flags->weights_dir,
                  "Folder of mlp.safetensors and cnn.safetensors (default: written from seed 1)");
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->callback([flags, &context] { context.exit_code = RunBenchSwitch(*flags); });
}

}  // namespace gshare::cli
