// Clock: the only source of time for scheduler code.
//
// Scheduler and policy code never reads the system clock: it reads Executor::Now(). SteadyClock
// reads the monotonic clock of the machine (the node: its restore engine, its executor). The
// simulator keeps its own virtual time in its event queue (sim/sim_executor.h), whose
// TimerQueue fires equal times in the order they were set, so a simulated run is reproducible.
#pragma once

#include "gshare/common/units.h"

namespace gshare {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

// Monotonic wall time; its epoch is the moment the SteadyClock was constructed. Thread-safe.
class SteadyClock final : public Clock {
 public:
  SteadyClock();
  TimePoint Now() const override;

 private:
  std::chrono::steady_clock::time_point origin_;
};

}  // namespace gshare
