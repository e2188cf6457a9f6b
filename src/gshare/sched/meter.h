// Meter: the one accounting of what a scheduler's actions cost and what users got.
//
// Every executor feeds it (the simulated one now, the live node's later) from the actions it
// carries out: GPUs held, slice memory reserved and active, restores and checkpoints with their
// bytes, and each request's answer. Reports and metrics read it, so simulated and live figures
// share one definition. Figures cover an accounting window: from `accounting_start` (a warm-up
// before it still happens but is not counted) to the moment Freeze is called (the horizon: the
// last answer of a replay). Requests count when they arrive inside the window.
//
// Not thread-safe: the executor calls it from its event loop. Times passed in never go backward.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/model/gpu_type.h"
#include "gshare/model/request.h"
#include "gshare/sched/executor.h"

namespace gshare {

// The time integral of a level that changes at discrete instants (GPUs held, bytes reserved).
class UsageMeter {
 public:
  // Adds `delta` to the level at time `now` (now >= the last change).
  void Change(TimePoint now, double delta) {
    integral_ += level_ * ToSeconds(now - last_);
    last_ = now;
    level_ += delta;
    if (level_ > peak_) peak_ = level_;
  }
  // The integral of the level from time zero to `now` (level x seconds).
  double IntegralUntil(TimePoint now) const { return integral_ + level_ * ToSeconds(now - last_); }
  double level() const { return level_; }
  // Forgets the peak so far: the peak from now on starts at the current level.
  void ResetPeak() { peak_ = level_; }
  double peak() const { return peak_; }

 private:
  TimePoint last_{};
  double level_ = 0;
  double peak_ = 0;
  double integral_ = 0;
};

// One function's figures in the window.
struct FunctionMeterTotals {
  double reserved_byte_seconds = 0;  // slice memory held x seconds
  double active_byte_seconds = 0;    // ... while the function had a run in flight
  std::uint64_t restores = 0;
  std::uint64_t restore_bytes = 0;
  std::uint64_t checkpoints = 0;  // evictions that copied state back
  std::uint64_t checkpoint_bytes = 0;
  std::uint64_t requests = 0;     // answered, arrived in the window
  std::uint64_t met = 0;          // answered OK by the deadline
  std::uint64_t failed = 0;       // answered with an error
  std::vector<float> latency_ms;  // answer - arrival of requests answered OK, in answer order
};

struct MeterTotals {
  TimePoint start{};       // the accounting start
  TimePoint horizon{};     // where the window ends
  double gpu_seconds = 0;  // GPUs held x seconds
  double cost_usd = 0;     // GPU-seconds of each type x its hourly price / 3600
  int peak_gpus = 0;
  double reserved_byte_seconds = 0;
  std::uint64_t restores = 0;
  std::uint64_t restore_bytes = 0;
  std::uint64_t checkpoints = 0;
  std::uint64_t checkpoint_bytes = 0;
  std::uint64_t requests = 0;
  std::uint64_t met = 0;
  std::uint64_t failed = 0;
  std::vector<FunctionMeterTotals> functions;  // by FunctionId

  // Fraction of the window's requests answered OK by their deadline (1 when there are none).
  double slo_attainment() const {
    return requests == 0 ? 1.0 : static_cast<double>(met) / static_cast<double>(requests);
  }
};

class Meter {
 public:
  // `gpu_types` (by GpuTypeId) price the GPU time.
  Meter(std::span<const GpuType> gpu_types, TimePoint accounting_start);

  void GpuAcquired(TimePoint now, GpuTypeId type) { ChangeGpus(now, type, +1); }
  void GpuReleased(TimePoint now, GpuTypeId type) { ChangeGpus(now, type, -1); }
  // Slice memory of `function` reserved (delta > 0) or freed (delta < 0).
  void Reserved(TimePoint now, FunctionId function, double delta_bytes);
  // Slice memory of `function` that became busy (delta > 0: a run started on an idle slice) or
  // idle again (delta < 0).
  void Active(TimePoint now, FunctionId function, double delta_bytes);
  // A restore of `bytes` of model started.
  void Restored(TimePoint now, FunctionId function, std::uint64_t bytes);
  // An eviction started copying `bytes` of state back to the host.
  void Checkpointed(TimePoint now, FunctionId function, std::uint64_t bytes);
  // A request was answered: OK (a run ended) or with an error.
  void Answered(TimePoint now, const Request& request, bool ok);

  // Ends the window at `now`; later calls change nothing. The first call wins.
  void Freeze(TimePoint now);
  bool frozen() const { return frozen_; }

  // The window's figures: until the freeze, or until `now` while not frozen.
  MeterTotals Totals(TimePoint now) const;
  // (time, GPUs held) at every change from time zero until the freeze.
  const std::vector<std::pair<TimePoint, int>>& gpu_timeline() const { return gpu_timeline_; }
  double gpus_held() const { return gpus_.level(); }

 private:
  struct PerFunction {
    UsageMeter reserved;
    UsageMeter active;
    FunctionMeterTotals counts;  // restores, checkpoints, answers and latencies
  };
  // Raw integrals and counters at one instant, from time zero.
  struct Reading {
    double gpu_seconds = 0;
    std::vector<double> type_gpu_seconds;
    double reserved_byte_seconds = 0;
    std::vector<FunctionMeterTotals> functions;
  };

  void ChangeGpus(TimePoint now, GpuTypeId type, int delta);
  PerFunction& Function(FunctionId function);
  // Captures the baseline the first time the clock reaches the accounting start.
  void Touch(TimePoint now);
  Reading Read(TimePoint t) const;

  std::vector<GpuType> gpu_types_;
  TimePoint start_;
  bool baseline_taken_ = false;
  Reading baseline_;
  bool frozen_ = false;
  MeterTotals frozen_totals_;
  UsageMeter gpus_;
  std::vector<UsageMeter> type_gpus_;
  UsageMeter reserved_;
  std::vector<PerFunction> functions_;
  std::vector<std::pair<TimePoint, int>> gpu_timeline_;
};

}  // namespace gshare
