// LiveExecutor: the Executor of the live node, over emulated GPUs and real function processes.
//
// The scheduler's actions become work on the node (docs/live-node.md, "The live executor"):
//  - a GPU is one of the node's devices, held while acquired (GPU ids are never reused; each maps
//    to the index of its device, which is the GPU index the vGPU manager knows);
//  - Restore reserves the slice at once in the scheduler's terms, then makes it a slice of the
//    node's VGpuManager on the GPU's device, bound to the instance and with its segment allocated
//    through VGpuManager::Allocate (see "Memory" below), and binds an instance: an idle one is
//    restored through its switch (its snapshot copied onto the GPU by the restore engine and
//    mapped at the instance's addresses); otherwise a new process starts (its cold start) on a
//    staging segment in host memory, loads its model there, answers its readiness check, is
//    checkpointed into its snapshot and restored onto the slice like any other: a model reaches a
//    GPU only over the GPU's link. Where a process cannot load in host memory (see "Switch
//    mechanisms" below) it starts on the slice itself, and is resident once ready;
//  - Evict checkpoints the instance away through its switch. A kDiscardIfClean eviction frees
//    the reservation at once and returns kDiscarded (the instance counts as idle at once); the
//    switch then locks and unmaps the instance, copying only if the function wrote its image, and
//    a restore that needs the device memory or the instance meanwhile waits for it, as a copy
//    engine queues copies. kCheckpoint always copies and reports OnEvictDone;
//  - Run sends the batch to the instance over the function protocol (InstanceHost); its kernels
//    share the GPU's compute engine with the other resident instances (ComputeArbiter);
//  - an idle instance stops after `instance_keep`, down to the function's min_instances; one of a
//    function its owner keeps cold (SetKeptWarm) stops as soon as it is idle;
//  - a new instance whose image finds no room in the snapshot pool while another instance is
//    stopping (its snapshot about to go back) waits for that one's end and tries again; with
//    nothing stopping, its start fails;
//  - a process that dies is OnInstanceDied, with the requests of its runs in flight;
//  - a request not started by its latest start (Request::latest_start), or that its owner
//    cancels (Cancel: its client went away), is answered with the reason through the host and
//    never runs: the scheduler is told at once (OnRequestCancelled), from the timer or the call;
//  - a removed function (FunctionRemoved) is reported drained (Scheduler::OnFunctionDrained, then
//    LiveExecutorOptions::on_drained) once it has no slice, no instance and no request left, and
//    the executor forgets it.
// Time is the node's clock (resources.clock): Now, and every timer, on it. It feeds its meters as
// the simulator feeds its Meter (the same calls with the same bytes: the scheduler's reservations,
// not the manager's quotas).
//
// Memory. The executor checks the scheduler's calls against the contract in the scheduler's
// terms: the reservations it made, in bytes, against the GPU type's memory. The node's accounting
// is the VGpuManager's, and the executor keeps no byte counts of its own. A slice's quota is its
// reservation rounded up to the manager's slice granularity: the simulator takes reservations in
// bytes, and the policies reserve whole GPUs (keepalive) or a batch's memory (faaswap) that need
// not be multiples, so a reservation is rounded up rather than refused. Its segment, allocated
// once, is the reservation rounded up to the host page. The instance is bound in the manager as
// "<function name>#<instance id>" and holds at most one slice at a time: an instance re-bound
// while it leaves a slice gets its new one when the old one is gone. The segment is freed, the
// slice unbound and destroyed when the last operation on it ends (an eviction's unmapping, a
// copy in flight). Where the manager cannot grant what the contract allows (memory an eviction
// freed in the scheduler's eyes is still being unmapped, or rounding made the quotas of a GPU
// exceed it), a restore waits for memory being given back, or fails with the manager's
// ResourceExhausted through OnRestoreDone.
//
// Resize changes the reservation and, through VGpuManager::Resize, the slice's quota, at once. A
// growth the manager refuses while memory is still being given back on the GPU is granted when it
// is; any other refusal breaks the precondition that growth fits and is a violation (Internal,
// naming Resize and the manager's reason) that changes nothing. An emulated slice's segment keeps
// the size of its first reservation: the function's quota beyond it is capped there (an
// allocation past it fails in that request), and a shrink keeps the slice's quota at least the
// segment (its memory comes back to the manager when the slice leaves).
//
// Switch mechanisms (model/switch_mechanism.h), by function (SetSwitchMechanism; shim unless
// set). A shim instance has a control channel: on emulated GPUs the function library maps its
// slices; on CUDA GPUs the allocator shim does (the executor sets LD_PRELOAD to
// `cuda_shim_library`). A checkpoint instance has none: the driver's process checkpoint API
// switches it by the pid its host reports at readiness (its switch is made then), and its slice is
// charged in the vGPU manager with no device memory behind it (the process allocates its own).
// On CUDA GPUs every instance starts on its first slice (host staging is no memory a CUDA program
// can use), with CUDA_VISIBLE_DEVICES set to that GPU, and so does every checkpoint instance; none
// of them is prepared ahead (Prepare answers FailedPrecondition; PreparesAhead says so beforehand),
// and an idle instance is bound to a slice of the GPU it started on first, where there is one; on
// CUDA GPUs (and with keep_instances_on_their_gpu) only there (a restore elsewhere starts a new
// instance and stops an idle one away). A
// failed checkpoint stops the instance; a failed restore whose switch failed loses it; either way
// the scheduler's next restore starts another.
//
// Threading: everything runs on the clock's loop; the restore engine's copies run on its copy
// streams, the checkpoint API's blocking driver calls on `resources.driver_calls` (on
// `resources.copies` where that is null). The
// resources, registry and host must outlive the executor, and the vGPU manager every slice the
// executor made (copies in flight hold theirs); Shutdown before destroying it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gshare/device/cuda/cuda_checkpoint.h"
#include "gshare/device/device.h"
#include "gshare/model/compute_quantum.h"
#include "gshare/model/gpu_type.h"
#include "gshare/model/switch_mechanism.h"
#include "gshare/node/instance_host.h"
#include "gshare/node/loop_clock.h"
#include "gshare/node/restore_engine.h"
#include "gshare/node/snapshot_store.h"
#include "gshare/node/switch/channel_switch.h"
#include "gshare/node/switch/compute_arbiter.h"
#include "gshare/node/switch/switch_driver.h"
#include "gshare/node/switch/switch_factory.h"
#include "gshare/node/vgpu_manager.h"
#include "gshare/sched/executor.h"
#include "gshare/sched/function_registry.h"
#include "gshare/sched/meter.h"
#include "gshare/sched/scheduler.h"

namespace boost::asio {
class thread_pool;
}

namespace gshare {

// What the live executor drives; owned by the node.
struct NodeResources {
  LoopClock& clock;               // the node's one clock, and its event loop
  const SwitchFactory& switches;  // makes each instance's switch, by its function's mechanism
  boost::asio::thread_pool& copies;
  std::span<Device* const> devices;  // the GPUs (emulated or CUDA), all of `gpu_type`
  VGpuManager& vgpus;                // over `devices`: its GPU i is devices[i]
  Device& staging;                   // host memory where new instances load their models
  RestoreEngine& engine;             // over `devices` and `staging`
  SnapshotStore& snapshots;
  // Where the checkpoint mechanism's blocking driver calls run (null: on `copies`).
  boost::asio::thread_pool* driver_calls = nullptr;
  // The driver's process checkpoint API; null where the node has none, `checkpoint_api_note`
  // saying why (a function of the checkpoint mechanism then fails to start, saying it).
  ProcessCheckpointApi* checkpoint_api = nullptr;
  std::string checkpoint_api_note;
};

struct LiveExecutorOptions {
  GpuType gpu_type;  // describes the node's GPUs (memory, link, price) to policies and the meter
  Duration quantum = kDefaultComputeQuantum;  // the policy's (PolicyOptions::quantum)
  Duration instance_keep = std::chrono::minutes(10);
  // What Instances() reports as a cold start until one was observed; then the mean observed.
  Duration cold_start_estimate = std::chrono::seconds(1);
  std::uintptr_t device_base = fn::kDefaultDeviceBase;  // every instance's device memory
  // Give each instance its own range (base + id x reserve): for instances hosted in one process.
  bool distinct_device_ranges = false;
  // Fed with every action (a run's Meters, the server's Prometheus feed); each outlives the
  // executor.
  std::vector<MeterSink*> meters;
  // Called when a run ends OK: its function, batch size, elapsed time, and whether it had its GPU's
  // compute to itself the whole time (the profile learner uses those).
  std::function<void(FunctionId, int, Duration, bool)> on_run_observed;
  // Called when a restore ends OK: its function and the time from Restore to its end (a process
  // start included when it needed one).
  std::function<void(FunctionId, Duration)> on_restored;
  // A function whose instances died before they were ready this many times in a row fails its
  // restores at once (OnRestoreDone with the reason) for `start_failure_cooldown`, then gets
  // another try: a program that crashes at start cannot keep the node starting it forever.
  int max_start_failures = 3;
  Duration start_failure_cooldown = std::chrono::seconds(10);
  // Called once a removed function is drained and forgotten here (after the scheduler's
  // OnFunctionDrained): the owner frees what it keeps for it (its registry entry, its command).
  std::function<void(FunctionId)> on_drained;
  // Every new instance starts on its first slice instead of host staging (as on CUDA GPUs, where
  // this is always so): its model is loaded straight into the slice, and it is not prepared ahead.
  bool start_on_first_slice = false;
  // An instance that started on a GPU stays there (as on CUDA GPUs, where this is always so: its
  // CUDA_VISIBLE_DEVICES): a restore onto another GPU starts a new instance and stops an idle one
  // away.
  bool keep_instances_on_their_gpu = false;
  // The allocator shim a shim instance on a CUDA GPU preloads (LD_PRELOAD); the node's default
  // lies beside gshare (kCudaShimLibrary). Unused on emulated GPUs.
  std::string cuda_shim_library;
};

class LiveExecutor final : public Executor {
 public:
  LiveExecutor(NodeResources resources, const FunctionRegistry& functions, InstanceHost& host,
               LiveExecutorOptions options);
  ~LiveExecutor() override;

  void set_scheduler(Scheduler* scheduler) { scheduler_ = scheduler; }

  // Feeds `meter` with every action from now on, as LiveExecutorOptions::meters (for an owner that
  // needs the node's GPU type to make its meters). It must outlive the executor.
  void AddMeter(MeterSink& meter) { meters_.push_back(&meter); }
  // A request arrives now (its arrival, deadline and latest start are the caller's, on this
  // executor's clock).
  void Submit(const Request& request);
  // Cancels a submitted request that has not started (its client went away, the node stops): it
  // is answered at once with `status` through the host (InstanceHost::Fail), counted as never
  // run, and the scheduler is told (OnRequestCancelled) before this returns; it never runs. The
  // same path as a latest start that passes. False, and nothing changes, when the request is
  // running or already answered. Not from inside a scheduler callback.
  bool Cancel(RequestId request, const Status& status);
  // Starts an instance of `function` in host memory ahead of its first request: its process
  // starts, loads its model into staging, answers its readiness check, is checkpointed into its
  // snapshot and stays idle (as an instance whose slice was evicted), so that the first restore
  // copies instead of starting a process. `done` (on the loop, never inside the call) tells how it
  // ended. Until then the instance counts as bound (it may become a new slice's instance only once
  // it is idle).
  // Not called after Shutdown.
  void Prepare(FunctionId function, std::function<void(Status)> done);
  // How `function`'s instances switch (shim unless set); before its first restore.
  void SetSwitchMechanism(FunctionId function, SwitchMechanism mechanism);
  // Whether Prepare can start an instance of `function` ahead of need (not where its instances
  // start on their first slice: see "Switch mechanisms").
  bool PreparesAhead(FunctionId function) const { return !StartsOnGpu(function); }
  // Whether `function` keeps its idle instances (the default) or none: the server keeps cold the
  // functions whose room in the snapshot pool it lent out and took back (serve/pool_plan.h).
  // Cold, its idle instances stop now, and each later one as soon as it is idle, so the pool
  // holds its image only while it has work; its min_instances no longer counts.
  void SetKeptWarm(FunctionId function, bool warm);
  // A run of `function` that has not ended after `timeout` stops its instance: the instance
  // dies, and its requests go back to the policy (OnInstanceDied). Zero: no limit.
  void SetRunTimeout(FunctionId function, Duration timeout);
  // The owner removed `function` from the registry (and told the scheduler): its idle instances
  // stop now, the others as soon as they become idle; it is drained once nothing is left.
  void FunctionRemoved(FunctionId function);
  // Requests submitted and not yet answered.
  std::size_t unanswered() const { return requests_.size(); }
  // Whether anything is in flight that will reach the scheduler: a restore, an eviction's copy,
  // a run, a timer it set, a GPU starting. A replay ends when requests are all in and this is
  // false.
  bool Busy() const { return WorkInFlight() || scheduler_timers_ > 0; }
  // Whether real work is in flight (a restore, a copy back, a run, an instance starting or a
  // removed function's instances stopping): Busy, timers left aside. A manual clock moves to the
  // next timer only when this is false (ManualLoopClock::RunUntil).
  bool WorkInFlight() const;
  // New instances waiting for room in the snapshot pool (tests).
  std::size_t waiting_for_pool() const { return waiting_pool_.size(); }
  // Per-function records held (tests: they come back to their size as functions come and go).
  std::size_t functions_held() const {
    return run_timeouts_.size() + start_failures_.size() + cold_.size() + mechanisms_.size();
  }
  // What is in flight, for a stalled replay's diagnosis: GPUs, slices, runs, instances.
  std::string DebugState() const;
  // The first contract violation by the scheduler (a call that broke a precondition), or OK.
  const Status& violation() const { return violation_; }
  // Stops every instance and closes every switch; no scheduler callback fires after it.
  void Shutdown();

  // Executor interface.
  TimePoint Now() const override { return resources_.clock.Now(); }
  std::span<const GpuType> gpu_types() const override { return {&options_.gpu_type, 1}; }
  const GpuType& TypeOf(GpuId) const override { return options_.gpu_type; }
  Result<GpuId> AcquireGpu(GpuTypeId type, Duration startup) override;
  void ReleaseGpu(GpuId gpu) override;
  void Restore(GpuId gpu, FunctionId function, std::uint64_t reserve_bytes) override;
  EvictOutcome Evict(GpuId gpu, FunctionId function, EvictHint hint) override;
  bool Resize(GpuId gpu, FunctionId function, std::uint64_t new_bytes) override;
  void Run(GpuId gpu, FunctionId function, std::span<const RequestId> batch) override;
  void FailRequest(RequestId request, const Status& status) override;
  InstanceView Instances(FunctionId function) const override;
  void SetTimer(TimePoint at, std::uint64_t token) override;

 private:
  // kStarting: its process starts on its first slice. kReserved: bound to a slice whose memory or
  // restore has not begun. kBound: restored (or restoring) on its slice. kDetaching: leaving a
  // slice (counted idle unless `rebind`). kIdle: in host memory only. kStopping: going away.
  // kPreparing: starting in host memory with no slice (Prepare).
  enum class InstanceState {
    kPreparing,
    kStarting,
    kReserved,
    kBound,
    kDetaching,
    kIdle,
    kStopping
  };
  class SliceMemory;  // a slice of the vGPU manager with its segment (live_executor.cc)
  struct Instance {
    InstanceId id = 0;
    FunctionId function = 0;
    InstanceState state = InstanceState::kStarting;
    std::shared_ptr<SwitchDriver> switcher;
    bool ready = false;     // answered its readiness check
    bool attached = false;  // its first slice is mapped
    GpuId gpu = 0;          // while bound
    TimePoint started{};
    std::uint64_t keep_generation = 0;
    bool rebind = false;  // detaching, and already bound to a new slice
    // Detaching, and replaced by a new instance on another GPU (it keeps its own): stopped once
    // its detach ends, and no longer counted or bound meanwhile.
    bool stop_after_detach = false;
    // Work waiting for a detach to end: the restore onto the new slice.
    std::function<void()> after_detach;
    std::shared_ptr<SliceMemory> orphan;  // the slice it held when a checkpoint failed
    GpuId orphan_gpu = 0;
    std::shared_ptr<DeviceBuffer> staging;  // where it loads its model when it starts
    // Started on its first slice (not in staging): on that GPU's device, which it keeps.
    std::optional<std::size_t> home_device;
    std::function<void(Status)> on_prepared;  // kPreparing: Prepare's callback
    std::optional<Status> switch_failure;     // starting: what failed before its exit came
    LoopTimer exit_wait;                      // then: the stop, should the exit not come
  };
  enum class SliceState { kWaitingMemory, kRestoring, kResident };
  struct RunInFlight {
    std::vector<RequestId> batch;
    TimePoint started{};
    bool shared = false;  // another run was in flight on its GPU at some moment
    LoopTimer timeout;
  };
  struct Slice {
    InstanceId instance = 0;
    std::uint64_t reserve_bytes = 0;
    SliceState state = SliceState::kWaitingMemory;
    TimePoint restore_began{};                  // when Restore was called
    std::shared_ptr<SliceMemory> memory;        // shared with the switch operations in flight
    std::map<std::uint64_t, RunInFlight> runs;  // in flight, by run id
  };
  struct Gpu {
    std::size_t device = 0;
    bool held = false;
    bool ready = false;
    int runs_in_flight = 0;
    std::unordered_map<FunctionId, Slice> slices;
    std::unique_ptr<ComputeArbiter> arbiter;
    // Slices of instances leaving it (and of those whose checkpoint failed), whose memory comes
    // back to the manager when their checkpoint ends or their instance is gone.
    int leaving = 0;
    std::deque<FunctionId> waiting_memory;  // restores waiting for detaches to free memory
  };

  Gpu* CheckGpu(GpuId gpu, const char* call);
  Slice* CheckSlice(Gpu& gpu, GpuId id, FunctionId function, const char* call);
  void Violation(Status status);
  void StartSliceMemory(GpuId gpu, FunctionId function);
  void BindInstance(GpuId gpu, FunctionId function);
  void StartInstance(GpuId gpu, FunctionId function);
  // Starts `instance`'s process and attaches it: on a new staging segment of `reserve_bytes`, or,
  // with `on_gpu`, on its slice there (StartsOnGpu). On an error the instance is forgotten (and
  // its process stopped).
  Status LaunchInstance(Instance& instance, std::uint64_t reserve_bytes,
                        std::optional<GpuId> on_gpu = std::nullopt);
  // The switch of a checkpoint instance, made once its host told its pid, and attached to its
  // slice.
  void AttachUnmodified(InstanceId id, std::int64_t pid);
  // Attaches a starting instance to its first buffer (staging, or its slice); `keep_alive` holds
  // the buffer until the attach ends. Attached, it goes on (MaybeRestoreDone); failed, it is lost.
  void AttachFirst(Instance& instance, DeviceBuffer& buffer, std::uint64_t reserve_bytes,
                   ComputeArbiter* arbiter, std::shared_ptr<void> keep_alive);
  SwitchMechanism MechanismOf(FunctionId function) const;
  // Whether `function`'s instances start on their first slice: on CUDA GPUs, or switched by the
  // checkpoint API (which moves only what the process holds on a GPU).
  bool StartsOnGpu(FunctionId function) const;
  // Why Prepare cannot start one of `function`'s instances (StartsOnGpu).
  Status NotPreparedAhead(FunctionId function) const;
  void MaybeRestoreDone(Instance& instance);
  // Whether some instance is stopping (its snapshot goes back to the pool when it ends).
  bool InstanceStopping() const;
  // MaybeRestoreDone again for the instances waiting for room in the snapshot pool.
  void RetryWaitingPool();
  void RestoreFromStaging(InstanceId id);
  void RestoreFinished(GpuId gpu, FunctionId function, const Status& status);
  void Detached(InstanceId id, GpuId gpu, FunctionId function, std::shared_ptr<SliceMemory> memory,
                bool report, const Status& status, std::uint64_t copied_bytes,
                std::uint64_t skipped_bytes);
  // `exited`: reported by the process's exit (a starting instance's other failures wait for it).
  void InstanceLost(InstanceId id, const Status& status, bool exited = false);
  // A request leaves the executor answered without a run: cancelled (OnRequestCancelled) or
  // failed by the scheduler.
  void AnswerWithoutRun(RequestId request, const Status& status, AnswerOutcome outcome);
  // Reports a removed function drained, on an event of its own, once nothing of it is left.
  void CheckDrained(FunctionId function);
  bool Drained(FunctionId function) const;
  void BecomeIdle(Instance& instance);
  void StopInstance(Instance& instance);
  void RetryWaitingMemory(GpuId gpu);
  std::uint64_t SliceBytes(std::uint64_t reserve_bytes) const;
  // The manager's quota for `slice` with `reserve_bytes` reserved: rounded up to the granularity,
  // and never below its segment.
  std::uint64_t QuotaFor(const Slice& slice, std::uint64_t reserve_bytes) const;
  // What the scheduler has reserved on the GPU: the sum of its slices' reservations.
  static std::uint64_t ScheduledBytes(const Gpu& gpu);
  // Whether memory the manager holds on the GPU beyond the scheduler's reservations will come
  // back by itself: slices leaving it, or slices shrunk below their segments (when they leave).
  bool MemoryComing(const Gpu& gpu) const;
  // Sets the manager's quota of the slice for `reserve_bytes`. OK as well when a growth must wait
  // for memory coming back (RetryWaitingMemory grants it).
  Status SetSliceQuota(const Gpu& gpu, const Slice& slice, std::uint64_t reserve_bytes);
  std::uintptr_t DeviceBase(InstanceId id) const;

  NodeResources resources_;
  const FunctionRegistry& functions_;
  InstanceHost& host_;
  const LiveExecutorOptions options_;
  // Feeds every meter.
  template <typename F>
  void Account(F&& f) {
    for (MeterSink* meter : meters_) f(*meter);
  }
  std::vector<MeterSink*> meters_;  // LiveExecutorOptions::meters, then AddMeter's
  Scheduler* scheduler_ = nullptr;
  Status violation_;
  std::unordered_map<FunctionId, Duration> run_timeouts_;
  std::unordered_set<FunctionId> removed_;                      // removed, not yet drained
  std::unordered_set<FunctionId> cold_;                         // SetKeptWarm(false)
  std::unordered_map<FunctionId, SwitchMechanism> mechanisms_;  // those not shim
  bool cuda_gpus_ = false;                                      // the node's GPUs are CUDA GPUs
  // New instances whose checkpoint found the snapshot pool full while another instance was
  // stopping: tried again as instances end.
  std::vector<InstanceId> waiting_pool_;
  bool shut_down_ = false;

  ComputeArbiter staging_compute_;  // the host's compute, for models loading into staging
  std::vector<bool> device_held_;
  std::vector<Gpu> gpus_;  // by GpuId
  std::map<InstanceId, Instance> instances_;
  InstanceId next_instance_ = 1;
  std::uint64_t next_run_ = 1;
  struct Held {
    Request request;
    LoopTimer latest_start;  // cancels it, when it has a latest start
  };
  std::unordered_map<RequestId, Held> requests_;  // submitted, not answered
  std::unordered_set<RequestId> running_;         // in a run in flight
  std::map<std::uint64_t, LoopTimer> timers_;
  std::uint64_t next_timer_ = 0;
  int scheduler_timers_ = 0;  // timers set by SetTimer or GPU startups, not yet fired
  std::uint64_t device_reserve_bytes_ = 0;
  struct StartFailures {
    int in_a_row = 0;
    TimePoint last{};
    Status why;
  };
  std::map<FunctionId, StartFailures> start_failures_;
  Duration observed_cold_start_total_{};
  std::uint64_t observed_cold_starts_ = 0;
};

}  // namespace gshare
