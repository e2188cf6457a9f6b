// ExecNoise: how far each request's execution time strays from its function's profile.
//
// Real runs are not the profile: `--exec-noise lognormal:SIGMA[,straggler:P:X]` draws, for each
// request, a factor from a lognormal of mean 1 (log-space deviation SIGMA) and, with probability
// P, multiplies it by X (a straggler). A batch runs for the profile's batch latency times the mean
// of its requests' factors. The draws live in Workload::exec_factors, which only the simulated
// executor reads: a policy learns from runs that ended (ExecTimeEstimator), never from a draw.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gshare/common/random.h"
#include "gshare/common/status.h"
#include "gshare/sim/workload/workload.h"

namespace gshare {

struct ExecNoise {
  double sigma = 0;        // lognormal deviation of log(factor); 0: no noise
  double straggler_p = 0;  // probability that a request is a straggler
  double straggler_x = 1;  // a straggler's factor is multiplied by this
  bool none() const { return sigma == 0 && straggler_p == 0; }
};

// Parses "none", "lognormal:0.2" or "lognormal:0.2,straggler:0.01:10". InvalidArgument (naming
// the part at fault) unless SIGMA is in [0, 2], P in [0, 1] and X in [1, 1000], all finite.
Result<ExecNoise> ParseExecNoise(std::string_view text);
std::string FormatExecNoise(const ExecNoise& noise);

// Draws one factor per request of `workload` (seeded: the same seed gives the same draws) into
// workload.exec_factors; clears them when `noise` is none.
void DrawExecNoise(const ExecNoise& noise, std::uint64_t seed, Workload& workload);

// One factor of `noise` (a lognormal of mean 1, times X with probability P) from `random`.
double DrawNoiseFactor(const ExecNoise& noise, Random& random);

}  // namespace gshare
