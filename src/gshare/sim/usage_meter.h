// UsageMeter: the time integral of a level that changes at discrete instants (GPUs held, bytes
// reserved). Not thread-safe.
#pragma once

#include <algorithm>

#include "gshare/common/units.h"

namespace gshare {

class UsageMeter {
 public:
  // Adds `delta` to the level at time `now` (now >= the last change).
  void Change(TimePoint now, double delta) {
    Settle(now);
    level_ += delta;
    peak_ = std::max(peak_, level_);
  }
  // The integral of the level from time zero to `now` (level x seconds).
  double IntegralUntil(TimePoint now) const { return integral_ + level_ * ToSeconds(now - last_); }
  double level() const { return level_; }
  // Forgets the peak so far: the peak from now on starts at the current level.
  void ResetPeak() { peak_ = level_; }
  double peak() const { return peak_; }

 private:
  void Settle(TimePoint now) {
    integral_ += level_ * ToSeconds(now - last_);
    last_ = now;
  }
  TimePoint last_{};
  double level_ = 0;
  double peak_ = 0;
  double integral_ = 0;
};

}  // namespace gshare
