// The requests a replay sends: a trace's first `horizon` of time (all of it without one), at
// `speedup` (arrivals divided by it; each keeps its deadline's distance), renumbered from 0.
// Header-only, pure.
#pragma once

#include <optional>
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/model/request.h"

namespace gshare {

inline std::vector<Request> ReplayWindow(const std::vector<Request>& trace,
                                         std::optional<Duration> horizon, double speedup) {
  std::vector<Request> requests;
  for (const Request& r : trace) {
    if (horizon && r.arrival - TimePoint{} >= *horizon) break;
    Request scaled = r;
    scaled.id = requests.size();
    scaled.arrival =
        TimePoint{} + Duration(static_cast<Duration::rep>(
                          static_cast<double>((r.arrival - TimePoint{}).count()) / speedup));
    scaled.deadline = scaled.arrival + (r.deadline - r.arrival);
    requests.push_back(scaled);
  }
  return requests;
}

}  // namespace gshare
