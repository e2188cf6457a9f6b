// SimulatedExecutor: the simulator's world behind the Executor interface.
//
// A discrete-event model of GPUs of one type (the workload's):
//  - memory: exact per-GPU accounting of reservations; a reservation that does not fit in total is
//    a scheduler bug (the run fails with an Internal status naming the call); with fragmentation
//    (below) a restore that fits in total but in no free range fails softly (OnRestoreDone with
//    ResourceExhausted) and a growth no range holds is refused (Resize returns false);
//  - GPUs: AcquireGpu refuses (ResourceExhausted) beyond Options::max_gpus held at once;
//  - instances: each function starts with min_instances warm instances; a restore binds an idle
//    one, or starts one (Options::instance_cold_start before its copy) while the function is
//    below max_instances; an unbound instance stops after Options::instance_keep idle, down to
//    min_instances;
//  - one host-to-device copy engine per GPU, FIFO: a restore takes restore_overhead + model bytes
//    over the link bandwidth; one device-to-host engine for checkpoints, likewise; a device copy
//    never diverges from its host snapshot (inference runs write no model state), so an eviction
//    hinted kDiscardIfClean always discards;
//  - Options::world departs from that ideal (world_model.h): copies on one host node share its
//    host-memory bandwidth (AcquireGpu places a GPU on the first node with room), restores and
//    checkpoints take a noise factor, functions() gives the policy profiles that are off from
//    the truth the runs follow, and slices occupy contiguous ranges of their GPU's memory;
//  - compute shared by time slicing: runs in flight take exclusive quanta in round-robin order;
//    a quantum is never cut short by a newcomer (kernels are not preempted), a run alone on the
//    GPU runs to completion;
//  - GPUs acquired with a startup delay become usable when OnGpuReady fires;
//  - a request not started by its latest start (Request::latest_start) is answered
//    DeadlineExceeded and never runs: the scheduler is told (OnRequestCancelled).
// It feeds the Meter (sched/meter.h) from every action; the report reads the Meter.
// Single-threaded; driven by Simulator.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "gshare/common/random.h"
#include "gshare/common/status.h"
#include "gshare/common/timer_queue.h"
#include "gshare/model/compute_quantum.h"
#include "gshare/sched/executor.h"
#include "gshare/sched/function_registry.h"
#include "gshare/sched/meter.h"
#include "gshare/sched/scheduler.h"
#include "gshare/sim/schedule_log.h"
#include "gshare/sim/workload/workload.h"
#include "gshare/sim/world_model.h"

namespace gshare {

class SimulatedExecutor final : public Executor {
 public:
  struct Options {
    Duration quantum = kDefaultComputeQuantum;  // time-slice length
    bool record_schedule = false;               // keep a ScheduleLog of every restore and run
    // Measure the wall time of every scheduler callback (its decision latency), for benchmarks.
    bool time_decisions = false;
    // Start of the accounting window: GPU time, memory time and restores before it are left out
    // (a warm-up); requests are still all replayed.
    TimePoint accounting_start{};
    // The most GPUs held at once (a cluster cap); 0: no cap. AcquireGpu refuses beyond it.
    int max_gpus = 0;
    // Time to start a function instance (process) when a restore finds none idle.
    Duration instance_cold_start{};
    // An instance without a slice stops after this long, down to the function's min_instances.
    Duration instance_keep = std::chrono::minutes(10);
    // How far the world departs from the ideal (world_model.h); the default is the ideal one.
    WorldModel world{};
  };

  SimulatedExecutor(const Workload& workload, Options options);

  // The scheduler that receives events. Must be set before Run.
  void set_scheduler(Scheduler* scheduler) { scheduler_ = scheduler; }
  // The functions of the workload as the scheduler sees them (its context): their profiles carry
  // the world's prior error; the runs follow the workload's own.
  const FunctionRegistry& functions() const { return functions_; }

  // Executor interface.
  TimePoint Now() const override { return now_; }
  std::span<const GpuType> gpu_types() const override { return {&workload_.gpu, 1}; }
  const GpuType& TypeOf(GpuId) const override { return workload_.gpu; }
  Result<GpuId> AcquireGpu(GpuTypeId type, Duration startup) override;
  void ReleaseGpu(GpuId gpu) override;
  void Restore(GpuId gpu, FunctionId function, std::uint64_t reserve_bytes) override;
  EvictOutcome Evict(GpuId gpu, FunctionId function, EvictHint hint) override;
  bool Resize(GpuId gpu, FunctionId function, std::uint64_t new_bytes) override;
  std::uint64_t LargestFreeRange(GpuId gpu) const override;
  std::uint64_t LargestFreeRangeWithout(GpuId gpu,
                                        std::span<const FunctionId> released) const override;
  void Run(GpuId gpu, FunctionId function, std::span<const RequestId> batch) override;
  bool pipelines_loading() const override { return true; }
  void RunPipelined(GpuId gpu, FunctionId function, std::span<const RequestId> batch) override;
  void FailRequest(RequestId request, const Status& status) override;
  InstanceView Instances(FunctionId function) const override;
  void SetTimer(TimePoint at, std::uint64_t token) override;

  // Replays every request and every event they cause, to the end. `progress` (may be empty) is
  // called now and then with the simulated time and the number of completed requests.
  Status RunToEnd(const std::function<void(TimePoint, std::uint64_t)>& progress);

  // Valid after RunToEnd succeeded. A request answered with an error has no completion time
  // (TimePoint::max()).
  const std::vector<TimePoint>& completion_times() const { return completion_; }
  // The accounting of the run: frozen at the last answer.
  const Meter& meter() const { return meter_; }
  MeterTotals totals() const { return meter_.Totals(now_); }
  std::uint64_t events_processed() const { return events_processed_; }
  // Wall time of each scheduler callback in nanoseconds; empty unless Options::time_decisions.
  const std::vector<std::uint32_t>& decision_ns() const { return decision_ns_; }
  // Empty unless Options::record_schedule.
  const ScheduleLog& schedule_log() const { return log_; }

 private:
  enum class EventType : std::uint8_t {
    kGpuReady,
    kRestoreDone,
    kEvictDone,
    kSliceEnd,
    kTimer,
    kEnterCompute,  // a pipelined run's first layer group is on the GPU
    kLatestStart,   // a request's latest start (value: its id)
    kTransferStep,  // contended world: a copy engine's front starts moving or ends (value:
                    // generation; function: the direction)
    kRestoreFailed  // fragmented world: no free range held a restore
  };
  struct Event {
    EventType type;
    GpuId gpu;
    FunctionId function;
    std::uint64_t value;  // slice generation or timer token
  };
  enum class ResidencyState : std::uint8_t { kRestoring, kResident, kEvicting };
  struct Residency {
    std::uint64_t bytes = 0;
    ResidencyState state = ResidencyState::kRestoring;
    int runs_in_flight = 0;
    // Batch memory of the runs in flight beyond batch 1 (MemoryForBatch minus GPU memory): the
    // reservation must hold the GPU memory plus this.
    std::uint64_t batch_bytes_in_flight = 0;
    std::size_t record = 0;  // index into log_.residencies when recording
    TimePoint copy_start{};  // the restore's copy on the host-to-device engine
    TimePoint copy_done{};   // contended world: as predicted when the copy started
    bool copy_started = false;
    std::uint64_t offset = 0;  // fragmented world: where its range starts
    TimePoint moved_until{};   // fragmented world: a move's copy ends then
    // Contended world: pipelined runs waiting for the copy to start (to time their layers), and
    // runs whose compute ended before the restore did (answered when it ends).
    std::vector<std::int32_t> pipelined_waiting{};
    std::vector<std::int32_t> ended_before_restore{};
  };
  // Contended world: one copy on a GPU's engine, a restore (host to device) or a checkpoint.
  struct Transfer {
    FunctionId function = 0;
    double bytes_left = 0;  // noise-scaled bytes still to move
    TimePoint ready_at{};   // a restore's instance is started
    Duration overhead{};    // fixed cost before the bytes move
    bool moving = false;
  };
  // Contended world: one direction of a GPU's link, FIFO; its front is in progress.
  struct CopyEngine {
    std::deque<Transfer> queue;
    double rate = 0;  // bytes per second of the front while it moves
    TimePoint since{};
    std::uint64_t generation = 0;  // of the front's pending kTransferStep
  };
  static constexpr int kToDevice = 0;
  static constexpr int kToHost = 1;
  struct Node {
    int gpus = 0;                               // held GPUs placed on it
    std::vector<std::pair<GpuId, int>> moving;  // (GPU, direction) of copies moving bytes
  };
  struct InstancePool {
    int bound = 0;
    std::deque<TimePoint> idle_since;  // warm instances without a slice, oldest first
  };
  struct Execution {
    FunctionId function = 0;
    Duration remaining{};
    std::vector<RequestId> batch;
    std::size_t record = 0;         // index into log_.runs when recording
    std::uint64_t batch_bytes = 0;  // this run's share of Residency::batch_bytes_in_flight
    TimePoint started{};
  };
  struct Gpu {
    bool held = false;
    bool ready = false;
    std::uint64_t memory_used = 0;
    std::unordered_map<FunctionId, Residency> residents;
    TimePoint h2d_free_at{};
    TimePoint d2h_free_at{};
    // Compute: the run holding the GPU, the round-robin queue, the current quantum.
    std::int32_t current = -1;  // index into executions_, or -1 when compute is idle
    std::deque<std::int32_t> waiting;
    TimePoint slice_start{};
    TimePoint slice_end{};
    std::uint64_t slice_generation = 0;
    std::size_t node = 0;  // contended world
    // Fragmented world: the slices' ranges, offset -> bytes.
    std::map<std::uint64_t, std::uint64_t> ranges;
    std::uint64_t largest_gap = 0;  // of `ranges` (the whole memory when there are none)
    CopyEngine engines[2];          // contended world: kToDevice, kToHost
  };

  Gpu* CheckGpu(GpuId gpu, const char* call);
  void Fail(Status status);
  void Dispatch(const Event& event);
  void OnSliceEnd(GpuId gpu_id, std::uint64_t generation);
  void StartSlice(GpuId gpu_id);
  // Run and RunPipelined: checks the call, creates the execution and sends it to the GPU's
  // compute, now or (pipelined) when its first layer group is on the GPU.
  void StartRun(GpuId gpu_id, FunctionId function, std::span<const RequestId> batch,
                bool pipelined);
  // The execution joins the GPU's round robin.
  void EnterCompute(GpuId gpu_id, std::int32_t index);
  void CompleteExecution(GpuId gpu_id, std::int32_t index);
  void ChangeActive(FunctionId function, std::uint64_t bytes, bool start);
  void Answer(RequestId id, AnswerOutcome outcome);
  void LatestStartPassed(RequestId id);
  int ExpiredInstances(FunctionId function) const;
  // The ends of a restore's and a checkpoint's copy, in either world.
  void FinishRestore(GpuId gpu_id, FunctionId function);
  void FinishCheckpoint(GpuId gpu_id, FunctionId function);
  // Fragmented world: the first free range of `bytes` (first fit), and the largest free range.
  std::optional<std::uint64_t> FirstFit(const Gpu& gpu, std::uint64_t bytes) const;
  // The largest free range if the ranges at `skipped` (sorted offsets) were free too.
  std::uint64_t LargestGapWithout(const Gpu& gpu, std::span<const std::uint64_t> skipped) const;
  // Keeps Gpu::largest_gap up to date after its ranges change.
  void RangesChanged(Gpu& gpu) const;
  // A restore's or checkpoint's copy time times a noise draw (unchanged without restore noise).
  Duration Noisy(Duration d);
  // Contended world: the fluid model of the copy engines (sim_executor.cc).
  void QueueTransfer(GpuId gpu_id, int direction, Transfer transfer);
  void StartFront(GpuId gpu_id, int direction);
  void OnTransferStep(GpuId gpu_id, int direction, std::uint64_t generation);
  void CatchUpNode(std::size_t node);
  void PaceNode(std::size_t node);
  void TimePipelined(GpuId gpu_id, std::int32_t index);
  void UnbindInstance(FunctionId function);

  const Workload& workload_;
  FunctionRegistry functions_;  // as the policy sees them: with the world's prior error
  Options options_;
  Scheduler* scheduler_ = nullptr;
  TimePoint now_{};
  TimerQueue<Event> events_;
  std::vector<Gpu> gpus_;
  std::vector<Execution> executions_;
  std::vector<std::int32_t> free_executions_;
  mutable std::vector<std::uint64_t> skipped_;  // scratch of LargestFreeRangeWithout
  std::vector<TimePoint> completion_;
  std::vector<bool> answered_;
  std::vector<bool> started_;    // in a run (in flight or done)
  std::uint64_t completed_ = 0;  // requests answered, OK or not
  int gpus_held_ = 0;
  std::vector<InstancePool> instances_;
  std::vector<Node> nodes_;  // contended world
  Random restore_random_;    // restore noise
  std::uint64_t events_processed_ = 0;
  Status error_;

  Meter meter_;
  ScheduleLog log_;
  std::vector<std::uint32_t> decision_ns_;
};

}  // namespace gshare
