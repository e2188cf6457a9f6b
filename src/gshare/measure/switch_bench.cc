#include "gshare/measure/switch_bench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <utility>

#include "examples/runtime/example_weights.h"
#include "examples/runtime/model_function.h"
#include "examples/runtime/output_checker.h"
#include "gshare/device/device_registry.h"
#include "gshare/device/emulated/copy_engine.h"
#include "gshare/measure/copy_crew.h"
#include "gshare/measure/scratch_folder.h"
#include "gshare/measure/stats.h"
#include "gshare/node/live_node.h"
#include "gshare/node/switch/channel_switch.h"

namespace gshare::measure {
namespace {

// Runs on the node's loop thread (LiveNode::StartLoopThread).
class Bench {
 public:
  explicit Bench(LiveNode& node) : node_(node) {}

  // Runs `start` on the loop with a Done callback and returns its status and the time from the
  // call to the callback, both read on the loop (as the live executor sees a switch).
  template <typename Start>
  std::pair<Status, double> Timed(Start start) {
    // Shared promises here: the loop may still be inside set_value when this thread wakes.
    auto done = std::make_shared<std::promise<std::pair<Status, double>>>();
    auto result = done->get_future();
    const LoopClock& clock = node_.clock();
    boost::asio::post(node_.loop(), [&start, &clock, done] {
      const TimePoint begin = clock.Now();
      start([&clock, done, begin](Status s) {
        done->set_value({s, ToSeconds(clock.Now() - begin) * 1e3});
      });
    });
    return result.get();
  }

  Result<SwitchResult> Measure(const std::string& model, const std::filesystem::path& weights_dir,
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
    const std::string weights =
        model == "echo" ? "" : (weights_dir / (model + ".safetensors")).string();
    auto function = examples::ModelFunction::Create(**runtime, model, weights);
    if (!function.ok()) return function.status();
    auto input = checker.InputFor(model, 0);
    if (!input.ok()) return input.status();
    auto before = (*function)->Infer(*input);
    if (!before.ok()) return before.status();

    std::vector<double> checkpoints, restores, copies, maps, handoffs, fixed;
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
      const RestoreSteps& steps = instance->last_restore_steps();
      checkpoints.push_back(checkpoint_ms);
      restores.push_back(restore_ms);
      copies.push_back(Ms(steps.copy));
      maps.push_back(Ms(steps.map));
      handoffs.push_back(Ms(steps.start + steps.copy_notice));
      fixed.push_back(restore_ms - Ms(steps.copy));
    }
    result.model_bytes = instance->last_restore().bytes;
    result.checkpoint = SpreadOf(checkpoints);
    result.restore = SpreadOf(restores);
    result.copy = SpreadOf(copies);
    result.map_ms = Median(maps);
    result.handoff_ms = Median(handoffs);
    result.fixed = SpreadOf(fixed);
    auto after = (*function)->Infer(*input);
    if (!after.ok()) return after.status();
    result.outputs_identical = *after == *before;

    // The raw limit, in the same run: the image's bytes, host to the GPU it is on now.
    auto raw =
        RawMilliseconds(*gpus[static_cast<std::size_t>(gpu)], result.model_bytes, repetitions);
    if (!raw.ok()) return raw.status();
    result.raw_ms = raw->first;
    result.raw_method = raw->second;
    result.wake_ms = WakeMilliseconds(repetitions);

    // The node lets the instance go before the function ends, so its end is no failure.
    close_on_loop.Close();
    function->reset();
    runtime->reset();
    return result;
  }

 private:
  static constexpr std::uint64_t kReserve = 1ULL << 30;
  static constexpr std::uint64_t kSliceBytes = 64ULL << 20;

  // The median time from a post on this thread to the loop running it.
  double WakeMilliseconds(int repetitions) {
    std::vector<double> wakes;
    const LoopClock& clock = node_.clock();
    for (int round = 0; round <= repetitions; ++round) {
      auto woke = std::make_shared<std::promise<double>>();
      auto result = woke->get_future();
      const TimePoint begin = clock.Now();
      boost::asio::post(node_.loop(), [&clock, woke, begin] {
        woke->set_value(ToSeconds(clock.Now() - begin) * 1e3);
      });
      const double ms = result.get();
      if (round > 0) wakes.push_back(ms);
    }
    return Median(wakes);
  }

  static MsSpread SpreadOf(const std::vector<double>& values) {
    return {Median(values), Percentile(values, 25), Percentile(values, 75)};
  }

  // The best raw method's median and name, in the same run (see the header).
  Result<std::pair<double, std::string>> RawMilliseconds(Device& gpu, std::uint64_t bytes,
                                                         int repetitions) {
    if (bytes == 0) return std::pair<double, std::string>{0.0, "none"};
    auto host = node_.inventory().host_memory().Allocate(bytes);
    if (!host.ok()) return host.status();
    std::fill((*host)->bytes().begin(), (*host)->bytes().end(), std::byte{0x5a});
    auto buffer = gpu.Allocate(bytes);
    if (!buffer.ok()) return buffer.status();
    std::vector<std::pair<std::string, std::function<Result<Duration>()>>> methods;
    methods.emplace_back("memcpy",
                         [&] { return gpu.TimedRawCopyToDevice(**buffer, (*host)->bytes()); });
    const int threads = node_.resources().engine.options().streams_per_device;
    std::unique_ptr<CopyCrew> crew;
    std::deque<std::vector<std::unique_ptr<CopyStream>>> stream_sets;
    auto* emulated = dynamic_cast<EmulatedBuffer*>(buffer->get());
    if (emulated != nullptr && gpu.info().link_bytes_per_second <= 0) {
      auto started = CopyCrew::Start(threads);
      if (!started.ok()) return started.status();
      crew = std::move(started).value();
      for (const auto& method :
           {std::pair<const char*, CopyCrew::CopyFunction>{"memcpy", &PlainMemcpy},
            std::pair<const char*, CopyCrew::CopyFunction>{"copy_engine", &CopyEngineCopy}}) {
        const CopyCrew::CopyFunction copy = method.second;
        methods.emplace_back(
            fmt::format("{}_x{}", method.first, threads), [&, copy]() -> Result<Duration> {
              return crew->Copy(emulated->bytes().data(), (*host)->bytes().data(), bytes, copy);
            });
      }
    } else {
      std::vector<int> counts = {2, threads, 2 * threads};
      std::sort(counts.begin(), counts.end());
      counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
      for (const int count : counts) {
        if (count < 2) continue;
        auto& streams = stream_sets.emplace_back();
        for (int i = 0; i < count; ++i) {
          auto stream = gpu.CreateStream();
          if (!stream.ok()) return stream.status();
          streams.push_back(std::move(stream).value());
        }
        methods.emplace_back(fmt::format("stream_x{}", count), [&]() -> Result<Duration> {
          const TimePoint begin = node_.clock().Now();
          GSHARE_RETURN_IF_ERROR(CopyOnStreams(
              streams, bytes, [&](CopyStream& stream, std::uint64_t offset, std::uint64_t part) {
                return stream.CopyToDevice(**buffer, offset,
                                           (*host)->bytes().subspan(offset, part));
              }));
          return node_.clock().Now() - begin;
        });
      }
    }
    double best = 0;
    std::string best_name;
    for (auto& [name, method] : methods) {
      std::vector<double> times;
      for (int round = 0; round <= repetitions; ++round) {
        auto took = method();
        if (!took.ok()) return took.status();
        if (round > 0) times.push_back(ToSeconds(*took) * 1e3);
      }
      const double median = Median(times);
      if (best_name.empty() || median < best) {
        best = median;
        best_name = name;
      }
    }
    return std::pair<double, std::string>{best, best_name};
  }

  LiveNode& node_;
  std::uint64_t next_range_ = 0;
};

}  // namespace

Result<std::vector<SwitchResult>> RunSwitchBench(const SwitchBenchOptions& options) {
  if (options.repetitions < 11) {
    return InvalidArgument(
        fmt::format("at least 11 timed rounds are needed (got {})", options.repetitions));
  }
  GSHARE_ASSIGN_OR_RETURN(DeviceOptions devices,
                          MakeDeviceOptions("emulated", "2x16Gi", options.link_bandwidth));
  LiveNodeOptions node_options;
  node_options.devices = std::move(devices);
  node_options.snapshot_pool_bytes = 256 * kMiB;
  node_options.prepared_bytes_per_gpu = 0;  // the bench faults its slices in itself, before timing
  node_options.policy = "";                 // it switches one function itself
  GSHARE_ASSIGN_OR_RETURN(auto node, LiveNode::Create(std::move(node_options)));
  std::filesystem::path weights_dir = options.weights_dir;
  ScratchFolder scratch;
  if (weights_dir.empty()) {  // the bundled seed's weights, in a scratch folder
    GSHARE_RETURN_IF_ERROR(scratch.Create(std::filesystem::temp_directory_path() /
                                          fmt::format("gshare-bench-switch-{}", ::getpid())));
    weights_dir = scratch.path();
    GSHARE_RETURN_IF_ERROR(examples::EnsureExampleWeights(weights_dir).status());
  }
  GSHARE_ASSIGN_OR_RETURN(auto checker, examples::OutputChecker::Create(weights_dir.string()));
  std::vector<SwitchResult> results;
  node->StartLoopThread();
  Bench bench(*node);
  for (const std::string model : {"mlp", "cnn", "echo"}) {
    auto result = bench.Measure(model, weights_dir, *checker, options.repetitions);
    if (!result.ok()) return result.status().WithContext(model);
    results.push_back(*result);
  }
  return results;
}

}  // namespace gshare::measure
