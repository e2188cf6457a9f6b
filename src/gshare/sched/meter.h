// Meter: the one accounting of what a scheduler's actions cost and what users got.
//
// Every executor feeds it (the simulated one and the live node's, through MeterSink) from the
// actions it carries out: GPUs held, slice memory reserved and active, restores and checkpoints
// with their bytes, and each request's answer. Reports and metrics read it, so simulated and live
// figures share one definition. Figures cover an accounting window: from `accounting_start` (a
// warm-up before it still happens but is not counted) to the moment Freeze is called (the horizon:
// the last answer of a replay). Requests count when they arrive inside the window.
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

// How a request was answered.
enum class AnswerOutcome : std::uint8_t {
  kOk,        // a run ended OK
  kFailed,    // with an error, after or without a run
  kNeverRan,  // cancelled before it started (its latest start passed, its client went away)
};

// What an executor reports to its accounting, from the actions it carries out. The Meter (the
// reports of a run) and the server's Prometheus feed (metrics::MeterFeed) implement it; an
// executor feeds every sink it is given with the same calls. Times passed in never go backward.
class MeterSink {
 public:
  virtual ~MeterSink() = default;
  virtual void GpuAcquired(TimePoint now, GpuTypeId type) = 0;
  virtual void GpuReleased(TimePoint now, GpuTypeId type) = 0;
  // Slice memory of `function` reserved (delta > 0) or freed (delta < 0).
  virtual void Reserved(TimePoint now, FunctionId function, double delta_bytes) = 0;
  // Slice memory of `function` that became busy (delta > 0: a run started on an idle slice) or
  // idle again (delta < 0).
  virtual void Active(TimePoint now, FunctionId function, double delta_bytes) = 0;
  // A restore of `bytes` of model started.
  virtual void Restored(TimePoint now, FunctionId function, std::uint64_t bytes) = 0;
  // An eviction started copying `bytes` of state back to the host.
  virtual void Checkpointed(TimePoint now, FunctionId function, std::uint64_t bytes) = 0;
  // An eviction left `bytes` of state uncopied because the host snapshot held them already (a
  // fast swap, whole or of the chunks that did not change). Only the live node knows this; the
  // default ignores it.
  virtual void CheckpointSkipped(TimePoint /*now*/, FunctionId /*function*/,
                                 std::uint64_t /*bytes*/) {}
  // A request was answered.
  virtual void Answered(TimePoint now, const Request& request, AnswerOutcome outcome) = 0;
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
  std::uint64_t never_ran = 0;    // ... of those, cancelled before they started
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
  std::uint64_t never_ran = 0;
  std::vector<FunctionMeterTotals> functions;  // by FunctionId

  // Fraction of the window's requests answered OK by their deadline (1 when there are none).
  double slo_attainment() const {
    return requests == 0 ? 1.0 : static_cast<double>(met) / static_cast<double>(requests);
  }
};

class Meter final : public MeterSink {
 public:
  // `gpu_types` (by GpuTypeId) price the GPU time.
  Meter(std::span<const GpuType> gpu_types, TimePoint accounting_start);

  // MeterSink.
  void GpuAcquired(TimePoint now, GpuTypeId type) override { ChangeGpus(now, type, +1); }
  void GpuReleased(TimePoint now, GpuTypeId type) override { ChangeGpus(now, type, -1); }
  void Reserved(TimePoint now, FunctionId function, double delta_bytes) override;
  void Active(TimePoint now, FunctionId function, double delta_bytes) override;
  void Restored(TimePoint now, FunctionId function, std::uint64_t bytes) override;
  void Checkpointed(TimePoint now, FunctionId function, std::uint64_t bytes) override;
  void Answered(TimePoint now, const Request& request, AnswerOutcome outcome) override;

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
