// LiveNode: one machine's live node, composed once. It owns the node's GPUs (GpuInventory), the
// vGPU manager that cuts them into slices, the host snapshot store, the restore engine, a staging
// area where new instances load their models, the copy threads, the function processes (an
// InstanceHost: ProcessHost by default), the live executor, the policy, and the one event loop
// they all live on, with the node's one clock. `gshare serve` (serve/live_backend.h), `gshare node
// replay` and every benchmark that runs functions use it; nothing else composes a node.
//
// What varies is injected at construction (LiveNodeParts): the clock (a test drives the whole node
// on a ManualLoopClock), the switch-driver factory (how an instance moves between host memory and
// a GPU), and the instance host (a test hosts instances in its own process). One slice granularity
// and one compute quantum for the node: the policy's (PolicyOptions), handed to the vGPU manager
// and the executor.
//
// Functions come and go while it runs: AddFunction registers a function with its launch, tells
// the scheduler and the host; RemoveFunction retires it, and once the executor reports it drained
// (nothing of it left) its registry entry and command are freed, so a node that deploys and
// deletes functions for weeks holds only the live ones (Tables).
//
// Create makes the node's process non-dumpable: it holds every function's device memory. On CUDA
// GPUs the node opens the driver's process checkpoint API where the driver has it (functions with
// `switch: checkpoint` need it; without it they fail to start, saying why), and its shim
// functions preload the allocator shim named by LiveExecutorOptions::cuda_shim_library (gshare
// serve: the one beside gshare; LiveExecutor, "Switch mechanisms").
//
// Threading: the loop is run by one thread at a time: the caller's (RunUntil on a manual clock,
// or the loop itself), or the node's own after StartLoopThread. Every method but Create, the
// constructors' accessors, StartLoopThread, OnLoop, Post and Shutdown is called on the loop.
// Objects made from resources() must be destroyed before the node.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/device/device_registry.h"
#include "gshare/device/emulated/copy_calibration.h"
#include "gshare/device/emulated/emulated_device.h"
#include "gshare/model/gpu_type.h"
#include "gshare/node/gpu_inventory.h"
#include "gshare/node/live_executor.h"
#include "gshare/node/loop_clock.h"
#include "gshare/node/process/process_host.h"
#include "gshare/node/restore_engine.h"
#include "gshare/node/snapshot_store.h"
#include "gshare/node/switch/switch_factory.h"
#include "gshare/node/vgpu_manager.h"
#include "gshare/sched/function_registry.h"
#include "gshare/sched/policy_options.h"
#include "gshare/sched/scheduler.h"

namespace boost::asio {
class thread_pool;
}

namespace gshare {

struct LiveNodeOptions {
  DeviceOptions devices;  // the GPUs (emulated ones on this node; see above)
  std::uint64_t snapshot_pool_bytes = 4 * kGiB;
  std::uint64_t snapshot_chunk_bytes = 8 * kMiB;
  // Address space for instances loading their models (pages are used only while they load).
  std::uint64_t staging_bytes = 64 * kGiB;
  RestoreEngineOptions engine;
  // Choose the emulated copy engine's routine (for the whole process) and, where every GPU is
  // emulated, the restore engine's streams per GPU by measuring them at start
  // (device/emulated/copy_calibration.h; about 1 s and two host buffers of up to 256 MiB, freed
  // after it). Off: `engine` as given, the routine as it is (tests, whose timings do not matter).
  bool calibrate_copies = true;
  int copy_threads = 2;
  // Device memory made ready ahead of allocations, per GPU (device/emulated/segment_pool.h).
  std::uint64_t prepared_bytes_per_gpu = 512 * kMiB;
  // How the node describes its GPUs to the policy and the accounting (GpuType): the fixed cost of
  // a restore and the price of a GPU hour.
  Duration restore_overhead = std::chrono::milliseconds(1);
  double price_per_hour_usd = 1.0;
  // The policy (policy_registry.h); empty: none (a tool that drives the node's resources itself).
  // Its slice_granularity is the vGPU manager's and its quantum the executor's: every GPU must
  // have at least one slice of memory (InvalidArgument otherwise).
  std::string policy = "gshare";
  PolicyOptions policy_options;
  // The executor's knobs; gpu_type and quantum are the node's.
  LiveExecutorOptions executor;
  ProcessHostOptions host;  // for the default host; its run_dir must exist
};

// What a test or a tool replaces; every part has a default.
struct LiveNodeParts {
  // The node's clock, made on its loop; default: SteadyLoopClock.
  std::function<std::unique_ptr<LoopClock>(boost::asio::io_context&)> clock;
  // How an instance switches between host memory and a GPU; default: CreateSwitchDriver.
  SwitchFactory switches;
  // The function processes; default: a ProcessHost over `requests`, started on the node's clock.
  // A host given here gets `requests` too (null where none was given).
  std::function<std::unique_ptr<InstanceHost>(LoopClock&, const FunctionRegistry&, RequestSource*)>
      host;
  // Where the host reads the requests' inputs and delivers their answers (none: the owner sends
  // the node no request). Must outlive the node.
  RequestSource* requests = nullptr;
  // The driver's process checkpoint API (a test's scripted one); default: the driver's own on
  // CUDA GPUs (OpenProcessCheckpointApi), none on emulated ones.
  std::shared_ptr<ProcessCheckpointApi> checkpoint_api;
};

// How one function runs on the node.
struct FunctionLaunch {
  ResolvedFunction function;  // its spec, resolved for the node's GPUs
  InstanceCommand command;    // how its processes start (the default host's)
  Duration run_timeout{};     // a run longer than this stops its instance; zero: none
  SwitchMechanism mechanism = SwitchMechanism::kShim;  // how its instances switch
};

class LiveNode {
 public:
  static Result<std::unique_ptr<LiveNode>> Create(LiveNodeOptions options,
                                                  LiveNodeParts parts = {});
  ~LiveNode();  // Shutdown
  LiveNode(const LiveNode&) = delete;
  LiveNode& operator=(const LiveNode&) = delete;

  boost::asio::io_context& loop() { return loop_; }
  LoopClock& clock() { return *clock_; }
  const GpuType& gpu_type() const { return gpu_type_; }
  const GpuInventory& inventory() const { return *inventory_; }
  const VGpuManager& vgpus() const { return *vgpus_; }
  SnapshotStore& snapshots() { return *snapshots_; }
  // What tools that drive switches themselves use (gshare bench function, bench switch).
  NodeResources resources();
  SwitchContext switch_context();
  const SwitchFactory& switches() const { return switches_; }
  LiveExecutor& executor() { return *executor_; }
  // The policy; null when LiveNodeOptions::policy is empty.
  Scheduler* scheduler() { return scheduler_.get(); }
  const FunctionRegistry& functions() const { return registry_; }
  // The default host; null when the host was injected.
  ProcessHost* process_host() { return process_host_; }

  // Registers a function, tells the scheduler and the host, and sets its run timeout.
  FunctionId AddFunction(FunctionLaunch launch);
  // Retires a function: no new request of it is taken; what is in flight finishes; once the
  // executor reports it drained, `on_drained` runs (the owner's records) and its registry entry
  // and command are freed. NotFound for a function it does not serve.
  Status RemoveFunction(FunctionId function, std::function<void()> on_drained = {});
  // A request arrives now (Request::latest_start honoured), or is cancelled (LiveExecutor).
  void Submit(const Request& request) { executor_->Submit(request); }
  bool Cancel(RequestId request, const Status& status) {
    return executor_->Cancel(request, status);
  }

  // The node's per-function records, for tests that check they come back to their size.
  struct Tables {
    std::size_t registry = 0;   // FunctionRegistry entries
    std::size_t scheduler = 0;  // Scheduler::FunctionsHeld
    std::size_t executor = 0;   // the executor's per-function records
    std::size_t host = 0;       // the default host's commands
    std::size_t draining = 0;   // removed, not yet drained
  };
  Tables tables() const;

  // Runs the loop on a thread of the node's own until Shutdown.
  void StartLoopThread();
  // Runs `work` on the loop and waits for its result (from a thread other than the loop's, with
  // the loop running); Unavailable (as the result's status, where it has one) once shut down.
  template <typename F>
  auto OnLoop(F work) -> decltype(work());
  // Posts `work` to the loop.
  template <typename F>
  void Post(F work) {
    boost::asio::post(loop_, std::move(work));
  }
  // Stops every instance and the executor (no scheduler callback after it), the loop thread if
  // there is one, and the host (processes end: SIGTERM, then SIGKILL). Idempotent. From a thread
  // other than the loop's when the loop thread runs; otherwise from the loop's own thread,
  // outside a handler.
  void Shutdown();
  // Waits for the transfers in flight on the restore engine's streams and the calls on the node's
  // copy threads to end; the node copies nothing after it. After the executor's Shutdown (tests:
  // their completions then release what they hold).
  void FinishCopies();
  // What the copy calibration at start measured and chose; nullopt when it did not run.
  const std::optional<CopyCalibration>& copy_calibration() const { return copy_calibration_; }

 private:
  LiveNode() = default;
  Status Build(LiveNodeOptions options, LiveNodeParts parts);
  Result<GpuType> DescribeGpus(Duration restore_overhead, double price_per_hour_usd) const;

  // Destroyed in reverse order: the policy, the executor and the host first (their timers are
  // the clock's, on the loop), then the clock and the loop (handlers still queued hold buffers of
  // the devices, which must outlive them), after the destructor has waited for the restore
  // engine's transfers and joined the copy threads (both post to the loop), then the node's memory
  // and devices.
  std::unique_ptr<GpuInventory> inventory_;
  std::unique_ptr<VGpuManager> vgpus_;
  std::unique_ptr<EmulatedDevice> staging_;
  std::unique_ptr<SnapshotStore> snapshots_;
  std::unique_ptr<RestoreEngine> engine_;
  std::optional<CopyCalibration> copy_calibration_;
  std::unique_ptr<boost::asio::thread_pool> copies_;
  std::unique_ptr<boost::asio::thread_pool> driver_calls_;  // the checkpoint API's blocking calls
  std::shared_ptr<ProcessCheckpointApi> checkpoint_api_;
  std::string checkpoint_api_note_;  // why there is none
  boost::asio::io_context loop_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::unique_ptr<LoopClock> clock_;
  SwitchFactory switches_;
  GpuType gpu_type_;
  FunctionRegistry registry_;
  std::unique_ptr<InstanceHost> host_;
  ProcessHost* process_host_ = nullptr;
  std::unique_ptr<LiveExecutor> executor_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unordered_map<FunctionId, std::function<void()>> on_drained_;
  std::thread loop_thread_;
  bool shut_down_ = false;
};

template <typename F>
auto LiveNode::OnLoop(F work) -> decltype(work()) {
  using R = decltype(work());
  // Shared: the loop may still be inside set_value when this thread wakes and returns.
  auto done = std::make_shared<std::promise<R>>();
  std::future<R> result = done->get_future();
  boost::asio::post(loop_, [&work, done] {
    if constexpr (std::is_void_v<R>) {
      work();
      done->set_value();
    } else {
      done->set_value(work());
    }
  });
  return result.get();
}

}  // namespace gshare
