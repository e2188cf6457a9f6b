// SimulatedExecutor: the simulator's world behind the Executor interface.
//
// A discrete-event model of GPUs of one type:
//  - memory: exact per-GPU accounting of reservations; a reservation that does not fit is a
//    scheduler bug (the run fails with an Internal status naming the call);
//  - one host-to-device copy engine per GPU, FIFO: a restore takes restore_overhead + model bytes
//    over the link bandwidth; one device-to-host engine for checkpoints, likewise;
//  - compute shared by time slicing: runs in flight take exclusive quanta in round-robin order;
//    a quantum is never cut short by a newcomer (kernels are not preempted), a run alone on the
//    GPU runs to completion;
//  - GPUs acquired with a startup delay become usable when OnGpuReady fires.
// It also meters what the report needs: request completions, GPUs held, bytes reserved, per-
// function busy time and restores. Single-threaded; driven by Simulator.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/timer_queue.h"
#include "gshare/sched/executor.h"
#include "gshare/sched/scheduler.h"
#include "gshare/sim/schedule_log.h"
#include "gshare/sim/usage_meter.h"
#include "gshare/sim/workload/workload.h"

namespace gshare {

// Per-function meters.
struct FunctionUsage {
  std::uint64_t restores = 0;
  std::uint64_t restore_bytes = 0;
  UsageMeter reserved_bytes;  // bytes reserved for the function, over all GPUs
  UsageMeter active_bytes;    // bytes reserved on GPUs where the function has a run in flight
};

// What the executor measured in the accounting window: from Options::accounting_start to the
// moment the last request completed.
struct ExecutorTotals {
  TimePoint horizon{};     // completion of the last request
  double gpu_seconds = 0;  // GPUs held x seconds, until the horizon
  int peak_gpus = 0;
  double reserved_byte_seconds = 0;
  std::uint64_t restores = 0;
  std::uint64_t restore_bytes = 0;
  std::vector<double> function_reserved_byte_seconds;  // by FunctionId
  std::vector<double> function_active_byte_seconds;    // by FunctionId
  std::vector<std::uint64_t> function_restores;
  std::vector<std::uint64_t> function_restore_bytes;
};

class SimulatedExecutor final : public Executor {
 public:
  struct Options {
    Duration quantum = std::chrono::milliseconds(20);  // time-slice length
    bool record_schedule = false;  // keep a ScheduleLog of every restore and run
    // Measure the wall time of every scheduler callback (its decision latency), for benchmarks.
    bool time_decisions = false;
    // Start of the accounting window: GPU time, memory time and restores before it are left out
    // (a warm-up); requests are still all replayed.
    TimePoint accounting_start{};
  };

  SimulatedExecutor(const Workload& workload, Options options);

  // The scheduler that receives events. Must be set before Run.
  void set_scheduler(Scheduler* scheduler) { scheduler_ = scheduler; }

  // Executor interface.
  TimePoint Now() const override { return now_; }
  GpuId AcquireGpu(Duration startup) override;
  void ReleaseGpu(GpuId gpu) override;
  void Restore(GpuId gpu, FunctionId function, std::uint64_t reserve_bytes) override;
  void Evict(GpuId gpu, FunctionId function, EvictMode mode) override;
  void Resize(GpuId gpu, FunctionId function, std::uint64_t new_bytes) override;
  void Run(GpuId gpu, FunctionId function, std::span<const RequestId> batch) override;
  void SetTimer(TimePoint at, std::uint64_t token) override;

  // Replays every request and every event they cause, to the end. `progress` (may be empty) is
  // called now and then with the simulated time and the number of completed requests.
  Status RunToEnd(const std::function<void(TimePoint, std::uint64_t)>& progress);

  // Valid after RunToEnd succeeded.
  const std::vector<TimePoint>& completion_times() const { return completion_; }
  const ExecutorTotals& totals() const { return totals_; }
  // (time, GPUs held) at every change, until the horizon.
  const std::vector<std::pair<TimePoint, int>>& gpu_timeline() const { return gpu_timeline_; }
  std::uint64_t events_processed() const { return events_processed_; }
  // Wall time of each scheduler callback in nanoseconds; empty unless Options::time_decisions.
  const std::vector<std::uint32_t>& decision_ns() const { return decision_ns_; }
  // Empty unless Options::record_schedule.
  const ScheduleLog& schedule_log() const { return log_; }

 private:
  enum class EventType : std::uint8_t { kGpuReady, kRestoreDone, kEvictDone, kSliceEnd, kTimer };
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
  };
  struct Execution {
    FunctionId function = 0;
    Duration remaining{};
    std::vector<RequestId> batch;
    std::size_t record = 0;         // index into log_.runs when recording
    std::uint64_t batch_bytes = 0;  // this run's share of Residency::batch_bytes_in_flight
  };
  struct Gpu {
    bool held = false;
    bool ready = false;
    std::uint64_t memory_used = 0;
    std::unordered_map<FunctionId, Residency> residents;
    TimePoint h2d_free_at{};
    TimePoint d2h_free_at{};
    int copies_in_flight = 0;
    // Compute: the run holding the GPU, the round-robin queue, the current quantum.
    std::int32_t current = -1;  // index into executions_, or -1 when compute is idle
    std::deque<std::int32_t> waiting;
    TimePoint slice_start{};
    TimePoint slice_end{};
    std::uint64_t slice_generation = 0;
  };

  Gpu* CheckGpu(GpuId gpu, const char* call);
  void Fail(Status status);
  void Dispatch(const Event& event);
  void OnSliceEnd(GpuId gpu_id, std::uint64_t generation);
  void StartSlice(GpuId gpu_id);
  void CompleteExecution(GpuId gpu_id, std::int32_t index);
  void ChangeActive(FunctionId function, std::uint64_t bytes, bool start);
  void MarkGpus(int delta);
  void CaptureTotals();
  void CaptureBaseline();
  ExecutorTotals Snapshot(TimePoint t) const;

  const Workload& workload_;
  Options options_;
  Scheduler* scheduler_ = nullptr;
  TimePoint now_{};
  TimerQueue<Event> events_;
  std::vector<Gpu> gpus_;
  std::vector<Execution> executions_;
  std::vector<std::int32_t> free_executions_;
  std::vector<TimePoint> completion_;
  std::uint64_t completed_ = 0;
  std::uint64_t events_processed_ = 0;
  Status error_;

  UsageMeter gpus_held_;
  UsageMeter reserved_bytes_;
  std::vector<FunctionUsage> function_usage_;
  std::vector<std::pair<TimePoint, int>> gpu_timeline_;
  bool captured_ = false;
  bool baseline_captured_ = false;
  ExecutorTotals baseline_;  // the meters at the accounting start
  ExecutorTotals totals_;
  ScheduleLog log_;
  std::vector<std::uint32_t> decision_ns_;
};

}  // namespace gshare
