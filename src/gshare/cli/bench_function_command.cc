// gshare bench function: one function process, switched out and back by a switch driver, timed,
// with the GPU memory the driver reports and the function's answers compared.
//
//   gshare bench function [--device auto|cuda|emulated] [--mechanism shim|checkpoint]
//                         --model NAME [--input-shape 1,3,224,224] [--slice 4Gi]
//                         [--repetitions 3] [--ready-timeout 600] [--json] -- PROGRAM [ARGS...]
//
// PROGRAM is started as a function process (docs/live-node.md): its socket in GSHARE_SOCKET, its
// control channel and device range in GSHARE_CONTROL_FD, GSHARE_DEVICE_BASE and
// GSHARE_DEVICE_RESERVE, on GPU 0 of the node, with the rest of this command's environment.
//   shim        (CUDA) with LD_PRELOAD of libgshare-cuda-shim.so from beside gshare: the function
//               runs unmodified; the node gives it a slice of --slice bytes and the shim keeps its
//               allocations there; checkpoint and restore move the bytes in use through the
//               node's restore engine. (Emulated GPUs: PROGRAM links the function library itself,
//               as gshare-function does, and nothing is preloaded.)
//   checkpoint  (CUDA) the driver's process checkpoint API on the function's pid.
// Once the function answers ready, one inference is the reference; then --repetitions rounds each
// checkpoint (timed from the call to its completion), free the slice and let the device return
// cached memory to the driver, read the driver's free memory, restore onto a new slice (timed)
// and infer again: the answer must be exactly the reference's.
//
// Exit status: 0 when every round passed, 1 when anything failed (the reason in "why"), 4 when the
// mechanism is unsupported here (the reason in "why"), 2 for bad usage.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gshare/cli/bench_stats.h"
#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/function_client.h"
#include "gshare/cli/program_folder.h"
#include "gshare/common/units.h"
#include "gshare/device/device_registry.h"
#include "gshare/fn/control_channel.h"
#include "gshare/node/live_node.h"
#include "gshare/node/process/child_process.h"
#include "gshare/node/process/instance_environment.h"
#include "gshare/node/switch/checkpoint_api_switch.h"
#include "gshare/node/switch/switch_factory.h"

extern char** environ;

namespace gshare::cli {
namespace {

constexpr int kExitUnsupported = 4;
constexpr std::uint64_t kDeviceReserve = 64 * kGiB;

struct BenchFunctionFlags {
  std::string device = "auto";
  std::string emulated = "2x16Gi";
  std::string mechanism = "shim";
  std::string model;
  std::string input_shape;
  std::string slice = "4Gi";
  bool slice_given = false;
  int repetitions = 3;
  int ready_timeout_s = 600;
  bool json = false;
  std::vector<std::string> program;
};

struct Report {
  std::string function;
  std::string mechanism;
  std::string device;
  std::string status = "fail";
  std::string why;
  std::uint64_t slice_bytes = 0;
  std::uint64_t allocated_bytes = 0;
  double checkpoint_ms = 0;
  double restore_ms = 0;
  // The share of a restore the switch spent moving bytes (the restore engine's copy for the shim,
  // the driver's restore and unlock calls for the checkpoint API); the rest is mapping and the
  // protocol.
  double restore_copy_ms = 0;
  // Handing out the next slice before each restore (untimed in restore_ms): on a CUDA GPU a fresh
  // exportable allocation, mapped and cleared, for exported memory is never reused.
  double slice_alloc_ms = 0;
  double restore_gbps = 0;
  std::uint64_t free_before_start_bytes = 0;
  std::uint64_t free_resident_bytes = 0;
  std::uint64_t free_after_checkpoint_bytes = 0;
  std::uint64_t freed_bytes = 0;
  std::uint64_t context_bytes = 0;
  bool outputs_identical = false;
  int rounds = 0;
};

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

// The program to start: a path as given, or a bare name looked up on PATH as a shell would (the
// child is started with execve, which does not search).
Result<std::string> FindProgram(const std::string& name) {
  if (name.empty()) return InvalidArgument("an empty program name");
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string_view folders = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const std::size_t colon = folders.find(':');
    const std::string folder(folders.substr(0, colon));
    const std::filesystem::path candidate =
        std::filesystem::path(folder.empty() ? "." : folder) / name;
    std::error_code error;
    if (::access(candidate.c_str(), X_OK) == 0 &&
        !std::filesystem::is_directory(candidate, error)) {
      return candidate.string();
    }
    if (colon == std::string_view::npos) break;
    folders.remove_prefix(colon + 1);
  }
  return NotFound(fmt::format("'{}' is not a program on PATH", name));
}

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
  FunctionBench(const BenchFunctionFlags& flags, LiveNode& node, SwitchResources& resources,
                SwitchMechanism mechanism, std::filesystem::path scratch)
      : flags_(flags),
        node_(node),
        resources_(resources),
        mechanism_(mechanism),
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

  // Fills `report`; returns the exit status.
  int Run(Report& report) {
    Device& gpu = *node_.inventory().devices()[0];
    report.device = fmt::format("{}: {}", DeviceKindName(gpu.info().kind), gpu.info().name);
    // The shim's slice is the function's device memory; the checkpoint API's is accounting only
    // (the function allocates through the driver itself), so it takes no more than it must.
    const std::uint64_t slice_bytes =
        mechanism_ == SwitchMechanism::kShim ? ParseBytes(flags_.slice).value() : 2 * kMiB;
    report.slice_bytes = slice_bytes;
    std::vector<std::int64_t> shape;
    if (!flags_.input_shape.empty()) shape = ParseShape(flags_.input_shape).value();
    const auto timeout = std::chrono::seconds(flags_.ready_timeout_s);

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

    FunctionClient client(node_.loop(), socket_.string(), flags_.model);
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

    std::vector<double> checkpoints, restores, restore_copies, slice_allocs;
    report.outputs_identical = true;
    for (int round = 0; round < flags_.repetitions; ++round) {
      auto [out, checkpoint_ms] = loop_.Timed(
          [this](SwitchDriver::Done done) { switch_->Checkpoint(true, std::move(done)); }, timeout);
      if (!out.ok()) {
        if (round == 0 && mechanism_ == SwitchMechanism::kCheckpoint &&
            out.message().find(kCheckpointApiRefused) != std::string::npos) {
          report.status = "unsupported";
          report.why = out.ToString();
          return kExitUnsupported;
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

      const TimePoint allocating = loop_.clock().Now();
      auto next = gpu.Allocate(slice_bytes);
      if (!next.ok()) return Fail(report, "allocating a slice: " + next.status().ToString());
      slice_allocs.push_back(ToSeconds(loop_.clock().Now() - allocating) * 1e3);
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
      auto answer = client.Infer(*input, timeout);
      if (!answer.ok()) {
        return Fail(report, fmt::format("inference after restore {}: {}{}", round + 1,
                                        answer.status().ToString(), LogTail(log_)));
      }
      if (*answer != *reference) report.outputs_identical = false;
      ++report.rounds;
    }
    report.checkpoint_ms = Median(checkpoints);
    report.restore_ms = Median(restores);
    report.restore_copy_ms = Median(restore_copies);
    report.slice_alloc_ms = Median(slice_allocs);
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
    return 0;
  }

 private:
  int Fail(Report& report, std::string why) {
    report.status = "fail";
    report.why = std::move(why);
    return 1;
  }

  Status Start(Device& gpu) {
    socket_ = scratch_ / "function.sock";
    log_ = scratch_ / "function.log";
    ProcessSpec spec;
    spec.argv = flags_.program;
    spec.log_path = log_.string();
    // The program is the user's (a PyTorch script, say): it gets this command's environment, but
    // for what the node sets itself, and the node's variables (instance_environment.h).
    std::map<std::string, std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string_view text = *entry;
      const std::size_t equals = text.find('=');
      if (equals == std::string_view::npos) continue;
      const std::string name(text.substr(0, equals));
      if (name.starts_with("GSHARE_") || name == "LD_PRELOAD" || name == "CUDA_VISIBLE_DEVICES") {
        continue;
      }
      env[name] = std::string(text.substr(equals + 1));
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
        GSHARE_ASSIGN_OR_RETURN(const std::filesystem::path folder, ProgramFolder());
        const std::filesystem::path shim = folder / kCudaShimLibrary;
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

  const BenchFunctionFlags& flags_;
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

void Print(const Report& r, bool json) {
  if (json) {
    const nlohmann::json out = {{"function", r.function},
                                {"mechanism", r.mechanism},
                                {"device", r.device},
                                {"status", r.status},
                                {"why", r.why},
                                {"rounds", r.rounds},
                                {"slice_bytes", r.slice_bytes},
                                {"allocated_bytes", r.allocated_bytes},
                                {"checkpoint_ms", r.checkpoint_ms},
                                {"restore_ms", r.restore_ms},
                                {"restore_copy_ms", r.restore_copy_ms},
                                {"slice_alloc_ms", r.slice_alloc_ms},
                                {"restore_gbps", r.restore_gbps},
                                {"free_before_start_bytes", r.free_before_start_bytes},
                                {"free_resident_bytes", r.free_resident_bytes},
                                {"free_after_checkpoint_bytes", r.free_after_checkpoint_bytes},
                                {"freed_bytes", r.freed_bytes},
                                {"context_bytes", r.context_bytes},
                                {"outputs_identical", r.outputs_identical}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("function %s, mechanism %s, on %s: %s%s%s\n", r.function.c_str(), r.mechanism.c_str(),
              r.device.c_str(), r.status.c_str(), r.why.empty() ? "" : ": ", r.why.c_str());
  if (r.rounds == 0) return;
  std::printf(
      "  rounds %d; allocated %s; checkpoint %.3f ms; restore %.3f ms (%.2f GB/s), of which "
      "%.3f ms moving bytes; %.3f ms handing out the slice before it\n",
      r.rounds, FormatBytes(r.allocated_bytes).c_str(), r.checkpoint_ms, r.restore_ms,
      r.restore_gbps, r.restore_copy_ms, r.slice_alloc_ms);
  std::printf(
      "  free GPU memory: %s before start, %s resident, %s after checkpoint: %s freed, %s left "
      "(the function's context and whatever it keeps)\n",
      FormatBytes(r.free_before_start_bytes).c_str(), FormatBytes(r.free_resident_bytes).c_str(),
      FormatBytes(r.free_after_checkpoint_bytes).c_str(), FormatBytes(r.freed_bytes).c_str(),
      FormatBytes(r.context_bytes).c_str());
  std::printf("  outputs identical after every restore: %s\n", r.outputs_identical ? "yes" : "NO");
}

int RunBenchFunction(const BenchFunctionFlags& flags) {
  Report report;
  report.mechanism = flags.mechanism;
  report.function = flags.model;
  auto mechanism = ParseSwitchMechanism(flags.mechanism);
  if (!mechanism.ok() || flags.program.empty() || flags.model.empty()) {
    std::fprintf(stderr, "gshare bench function: %s\n",
                 !mechanism.ok()       ? mechanism.status().message().c_str()
                 : flags.model.empty() ? "--model NAME is required"
                                       : "give the function's program after --");
    return 2;
  }
  if (flags.slice_given && *mechanism != SwitchMechanism::kShim) {
    std::fprintf(stderr,
                 "gshare bench function: --slice applies to the shim mechanism only (the "
                 "checkpoint API's function allocates through the driver itself)\n");
    return 2;
  }
  auto program = FindProgram(flags.program.front());
  if (!program.ok()) {
    std::fprintf(stderr, "gshare bench function: %s\n", program.status().ToString().c_str());
    return 2;
  }
  BenchFunctionFlags resolved = flags;
  resolved.program.front() = *program;
  if (!flags.input_shape.empty()) {
    auto shape = ParseShape(flags.input_shape);
    if (!shape.ok()) {
      std::fprintf(stderr, "gshare bench function: --input-shape: %s\n",
                   shape.status().message().c_str());
      return 2;
    }
  }
  auto devices = MakeDeviceOptions(flags.device, flags.emulated, "0");
  if (!devices.ok()) {
    std::fprintf(stderr, "gshare bench function: %s\n", devices.status().ToString().c_str());
    return 2;
  }
  LiveNodeOptions options;
  options.devices = std::move(devices).value();
  options.allow_cuda = true;  // this command drives its switch itself
  options.policy = "";
  auto slice_bytes = ParseBytes(flags.slice);
  if (!slice_bytes.ok() || *slice_bytes == 0 || *slice_bytes > kDeviceReserve) {
    std::fprintf(stderr, "gshare bench function: --slice: a size of bytes up to %s\n",
                 FormatBytes(kDeviceReserve).c_str());
    return 2;
  }
  // No emulated segments prepared ahead: on emulated GPUs a restore's time includes faulting in
  // its new slice (gshare bench switch measures without it).
  options.prepared_bytes_per_gpu = 0;
  // The shim's snapshot holds at most the slice; the checkpoint API keeps its bytes itself.
  options.snapshot_pool_bytes = *mechanism == SwitchMechanism::kShim ? *slice_bytes : 64 * kMiB;
  SwitchResources resources;  // before the node: it outlives the node's copy threads
  auto node = LiveNode::Create(std::move(options));
  if (!node.ok()) {
    report.why = node.status().ToString();
    Print(report, flags.json);
    return 1;
  }
  const DeviceInfo& gpu = (*node)->inventory().devices()[0]->info();
  if (!(*node)->inventory().note().empty()) {
    std::fprintf(stderr, "%s\n", (*node)->inventory().note().c_str());
  }
  if (Status supported = SwitchMechanismSupported(*mechanism, gpu); !supported.ok()) {
    report.device = fmt::format("{}: {}", DeviceKindName(gpu.kind), gpu.name);
    report.status = "unsupported";
    report.why = supported.ToString();
    Print(report, flags.json);
    return kExitUnsupported;
  }
  char scratch_template[] = "/tmp/gshare-bench-function-XXXXXX";
  const char* scratch = ::mkdtemp(scratch_template);
  if (scratch == nullptr) {
    report.why = fmt::format("cannot make a scratch folder: {}", std::strerror(errno));
    Print(report, flags.json);
    return 1;
  }
  int exit_code = 0;
  {
    FunctionBench bench(resolved, **node, resources, *mechanism, scratch);
    exit_code = bench.Run(report);
  }
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  Print(report, flags.json);
  return exit_code;
}

}  // namespace

void AddBenchFunctionCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchFunctionFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "function",
      "Checkpoint and restore one function process by a switch mechanism, with the GPU memory "
      "freed and its answers compared");
  cmd->add_option("--device", flags->device, "auto, cuda or emulated")->capture_default_str();
  cmd->add_option("--emulated", flags->emulated, "Emulated GPUs (\"2x16Gi\")")
      ->capture_default_str();
  cmd->add_option("--mechanism", flags->mechanism,
                  "shim (the allocator shim; emulated GPUs: the function library) or checkpoint "
                  "(the driver's process checkpoint API)")
      ->capture_default_str();
  cmd->add_option("--model", flags->model, "The model name the function serves")->required();
  cmd->add_option("--input-shape", flags->input_shape,
                  "The FP32 input's shape (\"1,3,224,224\"); default: the model's metadata");
  CLI::Option* slice =
      cmd->add_option("--slice", flags->slice, "The function's GPU slice (the shim mechanism only)")
          ->capture_default_str();
  cmd->add_option("--repetitions", flags->repetitions, "Checkpoint and restore rounds")
      ->check(WholeIn(1, 100))
      ->capture_default_str();
  cmd->add_option("--ready-timeout", flags->ready_timeout_s,
                  "Seconds to wait for the function to load its model")
      ->check(WholeIn(1, 3600))
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->add_option("program", flags->program, "-- PROGRAM [ARGS...]: the function to run")
      ->required();
  cmd->callback([flags, slice, &context] {
    flags->slice_given = slice->count() > 0;
    context.exit_code = RunBenchFunction(*flags);
  });
}

}  // namespace gshare::cli
