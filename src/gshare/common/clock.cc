#include "gshare/common/clock.h"

namespace gshare {

SteadyClock::SteadyClock() : origin_(std::chrono::steady_clock::now()) {}

TimePoint SteadyClock::Now() const {
  return TimePoint(
      std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - origin_));
}

}  // namespace gshare
