// PoolSizer: the growth rule that every pooled policy (faaswap, gshare) shares.
//
// A shared pool adds a GPU only when a request would miss its deadline on every GPU there is,
// starting ones included (a GPU asked for earlier is counted at the time it will be ready), and
// a GPU asked for now would finish it sooner: it is usable after PolicyOptions::instance_start,
// so a miss that a starting GPU or queued work causes no sooner than that is not a reason to
// grow. At most PolicyOptions::pool_growth_fraction of the pool (at least one GPU) starts at once.
// The pool's size is counted here: the policy reports each GPU it adds, each that becomes ready
// and each that leaves.
//
// Threading: the owning policy's event loop only.
#pragma once

#include <algorithm>
#include <cstddef>

#include "gshare/common/units.h"
#include "gshare/sched/policy_options.h"

namespace gshare {

class PoolSizer {
 public:
  explicit PoolSizer(const PolicyOptions& options)
      : startup_(std::max(options.instance_start, Duration::zero())),
        growth_fraction_(options.pool_growth_fraction),
        max_gpus_(options.max_gpus) {}

  // How long a GPU asked for now takes to accept work.
  Duration startup() const { return startup_; }
  // Whether a GPU asked for now is usable at once (no OnGpuReady follows).
  bool StartsReady() const { return startup_ <= Duration::zero(); }

  // Whether to add a GPU for a request whose best placement on the pool as it is (starting GPUs
  // at their ready time) finishes at `best_finish`: the request would miss `deadline` there, and
  // on a GPU asked for now, where it needs `work` (its restore and execution), it would finish
  // sooner. False while the pool is at its share of starting GPUs or at its cap.
  bool ShouldGrow(TimePoint now, Duration work, TimePoint best_finish, TimePoint deadline) const {
    if (best_finish <= deadline) return false;
    if (now + startup_ + work >= best_finish) return false;
    return MayStart();
  }
  // Whether one more GPU may start now (the growth share and the cap allow it).
  bool MayStart() const { return starting_ < MaxStarting() && !AtCap(); }
  // The same, counting `idle` GPUs that are ready but unused as starting too.
  bool MayStartWith(int idle) const { return starting_ + idle < MaxStarting() && !AtCap(); }
  bool AtCap() const { return max_gpus_ > 0 && alive_ >= static_cast<std::size_t>(max_gpus_); }

  // A GPU joined the pool (`ready`: usable now).
  void Added(bool ready) {
    alive_ += 1;
    if (!ready) starting_ += 1;
  }
  // A GPU that was starting is ready.
  void BecameReady() { starting_ -= 1; }
  // A GPU left the pool (released or lost); `was_ready`: it had started.
  void Removed(bool was_ready) {
    alive_ -= 1;
    if (!was_ready) starting_ -= 1;
  }

  std::size_t alive() const { return alive_; }
  int starting() const { return starting_; }

 private:
  int MaxStarting() const {
    const auto n = static_cast<int>(static_cast<double>(alive_) * growth_fraction_);
    return n < 1 ? 1 : n;
  }

  Duration startup_;
  double growth_fraction_;
  int max_gpus_;
  std::size_t alive_ = 0;
  int starting_ = 0;
};

}  // namespace gshare
