#include "gshare/measure/function_bench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "gshare/common/units.h"
#include "gshare/fn/control_channel.h"
#include "gshare/measure/function_client.h"
#include "gshare/measure/stats.h"
#include "gshare/node/live_node.h"
#include "gshare/node/process/child_process.h"
#include "gshare/node/process/instance_environment.h"
#include "gshare/node/switch/checkpoint_api_switch.h"

namespace gshare::measure {
namespace {

constexpr std::uint64_t kDeviceReserve = 64 * kGiB;

std::uint64_t Minus(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

// The last lines of the function's log, for an error message.
std::string LogTail(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > 15) lines.erase(lines.begin());
  }
  std::string tail;
  for (const std::string& line : lines) tail += "\n  | " + line;
  return tail.empty() ? "" : "; the function's log ends:" + tail;
}

// The node's loop on its own thread (LiveNode::StartLoopThread), and waits on it; times are the
// node's clock's.
class NodeLoop {
 public:
  explicit NodeLoop(LiveNode& node) : node_(node) { node_.StartLoopThread(); }
  // Runs `f` on the loop and waits for it.
  template <typename F>
  auto Run(F f) -> decltype(f()) {
    return node_.OnLoop(std::move(f));
  }
  // Starts `start(done)` on the loop and waits for `done`, at most `limit`; returns its status
  // and the time it took (ms). Past the limit it returns DeadlineExceeded; the operation may
  // still complete later, into a promise it shares.
  template <typename Start>
  std::pair<Status, double> Timed(Start start, std::chrono::seconds limit) {
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> result = done->get_future();
    const TimePoint begin = node_.clock().Now();
    node_.Post([start, done] { start([done](Status s) { done->set_value(std::move(s)); }); });
    if (result.wait_for(limit) != std::future_status::ready) {
      return {DeadlineExceeded(fmt::format("it did not complete within {} s", limit.count())), 0};
    }
    Status status = result.get();
    return {status, ToSeconds(node_.clock().Now() - begin) * 1e3};
  }
  const Clock& clock() const { return node_.clock(); }

 private:
  LiveNode& node_;
};

// What a switch may still use after the bench gave up on an operation (a driver call or a copy in
// flight on the node's copy threads, which only the node's end joins): owned by the caller and
// declared before the node, so it outlives them.
struct SwitchResources {
  std::unique_ptr<ProcessCheckpointApi> checkpoint_api;
  // The GPU's compute engine, for a function that asks for it (the function library does; the
  // CUDA shim does not: a real GPU time-slices itself).
  ComputeArbiter arbiter;
};

class FunctionBench {
 public:
  FunctionBench(const FunctionBenchOptions& options, LiveNode& node, SwitchResources& resources,
                std::filesystem::path scratch)
      : options_(options),
        node_(node),
        resources_(resources),
        mechanism_(options.mechanism),
        scratch_(std::move(scratch)),
        loop_(node) {}

  // Closes the switch and ends the function's process group. A slice that a copy may still be
  // writing (an operation the bench gave up on) is waited for, up to a bound, and otherwise left
  // allocated rather than freed under the copy.
  ~FunctionBench() {
    loop_.Run([&] {
      if (switch_) switch_->Close();
      child_.reset();  // kills the function's process group if it is still there
    });
    const TimePoint deadline = loop_.clock().Now() + std::chrono::seconds(30);
    while (switch_ && loop_.Run([&] { return switch_->uses_buffer(); })) {
      if (loop_.clock().Now() > deadline) {
        std::fprintf(stderr,
                     "gshare bench function: a copy still uses the slice; left allocated\n");
        (void)slice_.release();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    loop_.Run([&] { switch_.reset(); });
  }

  // Fills `report`: its status and why, and the figures measured.
  void Run(FunctionBenchReport& report) {
    Device& gpu = *node_.inventory().devices()[0];
    report.device = fmt::format("{}: {}", DeviceKindName(gpu.info().kind), gpu.info().name);
    // The shim's slice is the function's device memory; the checkpoint API's is accounting only
    // (the function allocates through the driver itself), so it takes no more than it must.
    const std::uint64_t slice_bytes =
        mechanism_ == SwitchMechanism::kShim ? options_.slice_bytes : 2 * kMiB;
    report.slice_bytes = slice_bytes;
    const std::vector<std::int64_t>& shape = options_.input_shape;
    const std::chrono::seconds timeout = options_.ready_timeout;

    if (Status trimmed = gpu.Trim(); !trimmed.ok()) return Fail(report, trimmed.ToString());
    auto before = gpu.QueryMemory();
    if (!before.ok()) return Fail(report, before.status().ToString());
    report.free_before_start_bytes = before->free_bytes;

    // The slice first: on a real GPU, its memory is the node's, exported to the function.
    auto slice = gpu.Allocate(slice_bytes);
    if (!slice.ok()) return Fail(report, "allocating the slice: " + slice.status().ToString());
    slice_ = std::move(slice).value();

    if (Status started = Start(gpu); !started.ok()) return Fail(report, started.ToString());
    auto attached = std::make_shared<std::promise<Status>>();
    std::future<Status> attach_result = attached->get_future();
    loop_.Run([&] {
      switch_->Attach(*slice_, slice_bytes, &resources_.arbiter,
                      [attached](Status s) { attached->set_value(std::move(s)); });
    });

    FunctionClient client(node_.loop(), socket_.string(), options_.model);
    if (Status ready = WaitReady(client, attach_result, timeout); !ready.ok()) {
      return Fail(report, ready.ToString() + LogTail(log_));
    }
    if (attach_result.wait_for(timeout) != std::future_status::ready) {
      return Fail(report,
                  fmt::format("the function answered ready but did not take its slice within {} "
                              "s (did the shim connect?){}",
                              timeout.count(), LogTail(log_)));
    }
    if (Status a = attach_result.get(); !a.ok()) {
      return Fail(report, "attaching the function: " + a.ToString() + LogTail(log_));
    }
    auto input = client.MakeInput(shape, timeout);
    if (!input.ok()) return Fail(report, input.status().ToString());
    auto reference = client.Infer(*input, timeout);
    if (!reference.ok()) return Fail(report, reference.status().ToString() + LogTail(log_));
    auto resident = gpu.QueryMemory();
    if (!resident.ok()) return Fail(report, resident.status().ToString());
    report.free_resident_bytes = resident->free_bytes;

    std::vector<double> checkpoints, fast_swaps, restores, restore_copies, slice_allocs,
        after_restore_inferences;
    report.outputs_identical = true;
    for (int round = 0; round < options_.repetitions; ++round) {
      auto [out, checkpoint_ms] = loop_.Timed(
          [this](SwitchDriver::Done done) { switch_->Checkpoint(true, std::move(done)); }, timeout);
      if (!out.ok()) {
        if (round == 0 && mechanism_ == SwitchMechanism::kCheckpoint &&
            out.message().find(kCheckpointApiRefused) != std::string::npos) {
          report.status = "unsupported";
          report.why = out.ToString();
          return;
        }
        return Fail(report,
                    fmt::format("checkpoint {}: {}{}", round + 1, out.ToString(), LogTail(log_)));
      }
      checkpoints.push_back(checkpoint_ms);
      const std::uint64_t moved = loop_.Run([&] { return switch_->last_checkpoint().bytes; });
      report.allocated_bytes = std::max(report.allocated_bytes, moved);
      slice_.reset();  // checkpointed: the switch no longer uses it
      if (Status trimmed = gpu.Trim(); !trimmed.ok()) return Fail(report, trimmed.ToString());
      auto after = gpu.QueryMemory();
      if (!after.ok()) return Fail(report, after.status().ToString());
      // The worst round: the least memory given back.
      if (round == 0 || after->free_bytes < report.free_after_checkpoint_bytes) {
        report.free_after_checkpoint_bytes = after->free_bytes;
      }

      auto* emulated_gpu = dynamic_cast<EmulatedDevice*>(&gpu);
      const std::uint64_t prepared_before =
          emulated_gpu != nullptr ? emulated_gpu->prepared_allocations() : 0;
      const TimePoint allocating = loop_.clock().Now();
      auto next = gpu.Allocate(slice_bytes);
      if (!next.ok()) return Fail(report, "allocating a slice: " + next.status().ToString());
      slice_allocs.push_back(ToSeconds(loop_.clock().Now() - allocating) * 1e3);
      if (auto* emulated = dynamic_cast<EmulatedDevice*>(&gpu); emulated != nullptr) {
        // Whether this slice was one the GPU's preparer had made ahead (nothing waits for it).
        if (emulated->prepared_allocations() > prepared_before) ++report.prepared_restores;
      }
      slice_ = std::move(next).value();
      DeviceBuffer* target = slice_.get();
      auto [in, restore_ms] = loop_.Timed(
          [this, target, slice_bytes](SwitchDriver::Done done) {
            switch_->Restore(*target, slice_bytes, &resources_.arbiter, std::move(done));
          },
          timeout);
      if (!in.ok()) {
        return Fail(report,
                    fmt::format("restore {}: {}{}", round + 1, in.ToString(), LogTail(log_)));
      }
      restores.push_back(restore_ms);
      restore_copies.push_back(
          loop_.Run([&] { return ToSeconds(switch_->last_restore().elapsed) * 1e3; }));
      // Nothing ran since the restore: the fast swap of an unchanged image, then back again. Not
      // for the checkpoint API, which copies everything whatever changed, seconds a call.
      if (mechanism_ != SwitchMechanism::kCheckpoint) {
        auto [fast, fast_ms] = loop_.Timed(
            [this](SwitchDriver::Done done) { switch_->Checkpoint(false, std::move(done)); },
            timeout);
        if (!fast.ok()) {
          return Fail(report, fmt::format("fast-swap checkpoint {}: {}{}", round + 1,
                                          fast.ToString(), LogTail(log_)));
        }
        fast_swaps.push_back(fast_ms);
        const TransferReport swapped = loop_.Run([&] { return switch_->last_checkpoint(); });
        report.fast_swap_copied_bytes = std::max(report.fast_swap_copied_bytes, swapped.bytes);
        report.fast_swap_compared_bytes =
            std::max(report.fast_swap_compared_bytes, swapped.compared_bytes);
        auto [back, back_ms] = loop_.Timed(
            [this, target, slice_bytes](SwitchDriver::Done done) {
              switch_->Restore(*target, slice_bytes, &resources_.arbiter, std::move(done));
            },
            timeout);
        (void)back_ms;
        if (!back.ok()) {
          return Fail(report, fmt::format("restore after the fast swap {}: {}{}", round + 1,
                                          back.ToString(), LogTail(log_)));
        }
      }
      const TimePoint asked = loop_.clock().Now();
      auto answer = client.Infer(*input, timeout);
      after_restore_inferences.push_back(ToSeconds(loop_.clock().Now() - asked) * 1e3);
      if (!answer.ok()) {
        return Fail(report, fmt::format("inference after restore {}: {}{}", round + 1,
                                        answer.status().ToString(), LogTail(log_)));
      }
      if (*answer != *reference) report.outputs_identical = false;
      ++report.rounds;
    }
    std::vector<double> inferences;
    for (int request = 0; request < options_.requests; ++request) {
      const int block = options_.request_block > 0 ? options_.request_block : options_.requests;
      if (request % block == 0 && options_.before_block) options_.before_block();
      const TimePoint sent = loop_.clock().Now();
      auto answer = client.Infer(*input, timeout);
      inferences.push_back(ToSeconds(loop_.clock().Now() - sent) * 1e3);
      if (!answer.ok()) {
        return Fail(report, fmt::format("timed inference {}: {}{}", request + 1,
                                        answer.status().ToString(), LogTail(log_)));
      }
      if (*answer != *reference) report.outputs_identical = false;
      ++report.requests;
    }
    if (!inferences.empty()) {
      report.infer_p50_ms = Median(inferences);
      report.infer_p90_ms = Percentile(inferences, 90);
    }
    report.checkpoint_ms = Median(checkpoints);
    report.fast_swap_ms = Median(fast_swaps);
    report.restore_ms = Median(restores);
    report.restore_copy_ms = Median(restore_copies);
    report.slice_alloc_ms = Median(slice_allocs);
    report.after_restore_infer_ms = Median(after_restore_inferences);
    report.freed_bytes = Minus(report.free_after_checkpoint_bytes, report.free_resident_bytes);
    report.context_bytes =
        Minus(report.free_before_start_bytes, report.free_after_checkpoint_bytes);
    // The driver holds a checkpoint API's bytes: what it took off the GPU is what it moved.
    if (mechanism_ == SwitchMechanism::kCheckpoint) report.allocated_bytes = report.freed_bytes;
    if (report.restore_ms > 0 && report.allocated_bytes > 0) {
      report.restore_gbps =
          static_cast<double>(report.allocated_bytes) / (report.restore_ms * 1e-3) / 1e9;
    }
    if (!report.outputs_identical) {
      return Fail(report, "an answer after a restore differs from the answer before checkpoint");
    }
    report.status = "pass";
  }

 private:
  void Fail(FunctionBenchReport& report, std::string why) {
    report.status = "fail";
    report.why = std::move(why);
  }

  Status Start(Device& gpu) {
    socket_ = scratch_ / "function.sock";
    log_ = scratch_ / "function.log";
    ProcessSpec spec;
    spec.argv = options_.program;
    spec.log_path = log_.string();
    // The program is the user's (a PyTorch script, say): it gets this command's environment, but
    // for what the node sets itself, and the node's variables (instance_environment.h).
    std::map<std::string, std::string> env;
    for (const auto& [name, value] : options_.environment) {
      if (name.starts_with("GSHARE_") || name == "LD_PRELOAD" || name == "CUDA_VISIBLE_DEVICES") {
        continue;
      }
      env[name] = value;
    }
    const bool cuda = gpu.info().kind == DeviceKind::kCuda;
    if (cuda) env["CUDA_VISIBLE_DEVICES"] = gpu.info().uuid;

    if (mechanism_ == SwitchMechanism::kCheckpoint) {
      GSHARE_ASSIGN_OR_RETURN(resources_.checkpoint_api, OpenProcessCheckpointApi());
    }
    std::optional<fn::ControlChannel> node_end;
    UniqueFd function_end;
    if (mechanism_ == SwitchMechanism::kShim) {
      GSHARE_ASSIGN_OR_RETURN(auto pair, fn::ControlChannel::CreatePair());
      node_end = std::move(pair.first);
      function_end = std::move(pair.second);
      spec.pass_fds = {function_end.get()};
      if (cuda) {
        const std::filesystem::path& shim = options_.shim_library;
        if (!std::filesystem::exists(shim)) {
          return NotFound(fmt::format("the CUDA shim {} is not beside gshare", shim.string()));
        }
        env["LD_PRELOAD"] = shim.string();
      }
    }
    spec.env = InstanceEnvironment({.control = mechanism_ == SwitchMechanism::kShim,
                                    .device_base = fn::kDefaultDeviceBase,
                                    .device_reserve_bytes = kDeviceReserve,
                                    .socket_path = socket_.string()},
                                   env);
    return loop_.Run([&]() -> Status {
      GSHARE_ASSIGN_OR_RETURN(child_, ChildProcess::Spawn(node_.loop(), spec));
      child_->OnExit([exit = exit_](int wait_status) { exit->set_value(wait_status); });
      SwitchTarget target{.mechanism = mechanism_,
                          .name = "bench-function",
                          .pid = child_->pid(),
                          .channel = node_end ? std::move(*node_end) : fn::ControlChannel(),
                          .checkpoint_api = resources_.checkpoint_api.get(),
                          .clock = &node_.clock(),
                          .on_failure = {}};
      GSHARE_ASSIGN_OR_RETURN(switch_, node_.switches()(node_.switch_context(), std::move(target)));
      return Status::Ok();
    });
  }

  // Polls the function's readiness until `timeout`; fails at once when the function exits or its
  // attach fails (a function that cannot get its slice never becomes ready). A function that
  // exits closes its control channel as it goes, so an attach may fail before the exit is seen:
  // the exit, when it follows within a few seconds, is what the failure reports.
  Status WaitReady(FunctionClient& client, std::future<Status>& attach,
                   std::chrono::seconds timeout) {
    const TimePoint deadline = loop_.clock().Now() + timeout;
    const auto exited = [this](std::chrono::seconds wait) -> std::optional<Status> {
      if (exited_.wait_for(wait) != std::future_status::ready) return std::nullopt;
      return Unavailable(fmt::format("the function exited before it was ready ({})",
                                     DescribeWaitStatus(exited_.get())));
    };
    while (loop_.clock().Now() < deadline) {
      if (auto gone = exited(std::chrono::seconds(0))) return *gone;
      if (attach.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        Status attached = attach.get();
        if (!attached.ok()) {
          if (auto gone = exited(std::chrono::seconds(5))) return *gone;
          return attached.WithContext("attaching the function");
        }
        attach = MakeReadyFuture(Status::Ok());
      }
      auto ready = client.Ready(std::chrono::seconds(5));
      if (ready.ok() && *ready) return Status::Ok();
      // Polling a process that loads its model: nothing to wait on but its socket.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return DeadlineExceeded(fmt::format("the function was not ready within {} s", timeout.count()));
  }

  static std::future<Status> MakeReadyFuture(Status status) {
    std::promise<Status> promise;
    promise.set_value(std::move(status));
    return promise.get_future();
  }

  const FunctionBenchOptions& options_;
  LiveNode& node_;
  SwitchResources& resources_;
  const SwitchMechanism mechanism_;
  const std::filesystem::path scratch_;
  std::filesystem::path socket_;
  std::filesystem::path log_;
  NodeLoop loop_;
  std::unique_ptr<ChildProcess> child_;  // on the loop
  // The function's wait status once it has exited (set on the loop; shared: the loop may still be
  // inside set_value when a waiter wakes).
  std::shared_ptr<std::promise<int>> exit_ = std::make_shared<std::promise<int>>();
  std::shared_future<int> exited_ = exit_->get_future().share();
  std::shared_ptr<SwitchDriver> switch_;  // on the loop
  std::unique_ptr<DeviceBuffer> slice_;
};

}  // namespace

FunctionBenchReport RunFunctionBench(const FunctionBenchOptions& options) {
  FunctionBenchReport report;
  report.mechanism = std::string(SwitchMechanismName(options.mechanism));
  report.function = options.model;
  const auto fail = [&](std::string why) {
    report.status = "fail";
    report.why = std::move(why);
    return report;
  };
  if (options.program.empty() || options.model.empty()) {
    return fail("a program and a model name are required");
  }
  if (options.slice_bytes == 0 || options.slice_bytes > kDeviceReserve) {
    return fail(
        fmt::format("the slice must be a size of bytes up to {}", FormatBytes(kDeviceReserve)));
  }
  LiveNodeOptions node_options;
  node_options.devices = options.devices;
  node_options.policy = "";
  // Emulated segments prepared ahead within the live node's budget and by its rules, unless asked
  // for fresh ones, whose page faults a restore then pays; nothing waits for the preparer, and the
  // report counts the restores that found a prepared slice.
  node_options.prepared_bytes_per_gpu =
      options.prepared_slices ? LiveNodeOptions{}.prepared_bytes_per_gpu : 0;
  // The shim's snapshot holds at most the slice; the checkpoint API keeps its bytes itself.
  node_options.snapshot_pool_bytes =
      options.mechanism == SwitchMechanism::kShim ? options.slice_bytes : 64 * kMiB;
  SwitchResources resources;  // before the node: it outlives the node's copy threads
  auto node = LiveNode::Create(std::move(node_options));
  if (!node.ok()) return fail(node.status().ToString());
  const DeviceInfo& gpu = (*node)->inventory().devices()[0]->info();
  report.note = (*node)->inventory().note();
  if (Status supported = SwitchMechanismSupported(options.mechanism, gpu); !supported.ok()) {
    report.device = fmt::format("{}: {}", DeviceKindName(gpu.kind), gpu.name);
    report.status = "unsupported";
    report.why = supported.ToString();
    return report;
  }
  char scratch_template[] = "/tmp/gshare-bench-function-XXXXXX";
  const char* scratch = ::mkdtemp(scratch_template);
  if (scratch == nullptr) {
    return fail(fmt::format("cannot make a scratch folder: {}", std::strerror(errno)));
  }
  {
    FunctionBench bench(options, **node, resources, scratch);
    bench.Run(report);
  }
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  return report;
}

}  // namespace gshare::measure
