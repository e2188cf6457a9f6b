// ExecTimeEstimator: execution-time estimates per function and batch size, learned online.
//
// A policy predicts a run's duration from this, never from the run itself: estimates start at
// the function's profile and move toward what runs took when they ended (an exponentially
// weighted mean, in integer nanoseconds, a quarter of the way per observation). When runs take
// exactly their profile the estimate stays exactly the profile. Beside the mean it keeps, per
// function, the streaming log-mean and log-variance of elapsed / profile over every batch size
// (LogStats), from which Quantile predicts a high quantile of a run's duration. Not thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "gshare/common/units.h"
#include "gshare/sched/function_registry.h"
#include "gshare/sched/log_stats.h"

namespace gshare {

class ExecTimeEstimator {
 public:
  explicit ExecTimeEstimator(const FunctionRegistry* functions) : functions_(functions) {}

  // The estimate for a batch of `batch` (clamped to 1..max_batch) of `function`.
  Duration Estimate(FunctionId function, int batch) const {
    const int b = Clamp(function, batch);
    if (auto it = learned_.find(function); it != learned_.end()) {
      const auto& learned = it->second;
      const auto i = static_cast<std::size_t>(b - 1);
      if (i < learned.size() && learned[i] > 0) return Duration(learned[i]);
    }
    return functions_->Get(function).ExecLatency(b);
  }

  // The duration a run of `batch` requests of `function` exceeds with the normal tail probability
  // of `z`: the profile times exp(log-mean + z log-sigma) of what runs took over their profile.
  Duration Quantile(FunctionId function, int batch, double z) const {
    const int b = Clamp(function, batch);
    const Duration profile = functions_->Get(function).ExecLatency(b);
    auto it = ratios_.find(function);
    const double factor = it == ratios_.end() ? prior_.Quantile(z) : it->second.Quantile(z);
    return Duration(static_cast<std::int64_t>(static_cast<double>(profile.count()) * factor));
  }

  // The largest batch (1..max_batch) whose estimate, and every smaller batch's, is within
  // `budget`; 1 when even one request's estimate exceeds it.
  int LargestBatchWithin(FunctionId function, Duration budget) const {
    const int max_batch = functions_->Get(function).max_batch;
    int b = 1;
    while (b < max_batch && Estimate(function, b + 1) <= budget) ++b;
    return b;
  }

  // A run of `batch` requests of `function` took `elapsed`.
  void Observe(FunctionId function, int batch, Duration elapsed) {
    if (elapsed <= Duration::zero()) return;
    const int b = Clamp(function, batch);
    auto& learned = learned_[function];
    const auto i = static_cast<std::size_t>(b - 1);
    if (i >= learned.size()) learned.resize(i + 1, 0);
    std::int64_t estimate = learned[i] > 0 ? learned[i] : Estimate(function, b).count();
    estimate += (elapsed.count() - estimate) / 4;
    learned[i] = estimate > 0 ? estimate : 1;
    const Duration profile = functions_->Get(function).ExecLatency(b);
    if (profile > Duration::zero()) {
      ratios_[function].Observe(static_cast<double>(elapsed.count()) /
                                static_cast<double>(profile.count()));
    }
  }

  // Drops what was learned about `function` (it was removed).
  void Forget(FunctionId function) {
    learned_.erase(function);
    ratios_.erase(function);
  }
  // Whether it learned anything about `function`, and for how many functions it did.
  bool Knows(FunctionId function) const { return learned_.contains(function); }
  std::size_t functions() const { return learned_.size(); }

 private:
  int Clamp(FunctionId function, int batch) const {
    const int max_batch = functions_->Get(function).max_batch;
    return batch < 1 ? 1 : (batch > max_batch ? max_batch : batch);
  }

  const FunctionRegistry* functions_;
  // By function, batch - 1; 0: not learned.
  std::unordered_map<FunctionId, std::vector<std::int64_t>> learned_;
  // By function: elapsed / profile, in logs, over every batch size.
  std::unordered_map<FunctionId, LogStats> ratios_;
  LogStats prior_;  // for the functions without a run yet
};

}  // namespace gshare
