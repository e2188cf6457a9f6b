// Fidelity: how well the simulator predicts a live replay.
//
// A live replay (gshare node replay) learns each function's execution profile from the runs of
// its first third (ProfileLearner), simulates the remaining two thirds with those profiles on a
// GPU type that describes the node's emulated GPUs, and compares the simulation with the live
// figures of the same two thirds. Relative errors are signed, (sim - live) / live; the SLO
// attainment difference is sim minus live as a fraction (0.02 is two points).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/model/request.h"
#include "gshare/sim/policy_report.h"

namespace gshare {

// Execution times observed per function and batch size, to build profiles from.
//
// Only runs that had their GPU to themselves are used when a batch size has any: a run that
// shared its GPU's compute took longer than its execution time. Not thread-safe.
class ProfileLearner {
 public:
  void Observe(FunctionId function, int batch, Duration elapsed, bool alone);

  // Latency by batch size 1..max_batch for `function`: the median of the observations of each
  // batch size; sizes without any are interpolated linearly between observed ones and held
  // constant beyond them. NotFound when the function has no observation.
  Result<std::vector<Duration>> ExecByBatch(FunctionId function, int max_batch) const;
  std::uint64_t observations(FunctionId function) const;

 private:
  struct Samples {
    std::vector<Duration> alone;
    std::vector<Duration> shared;
  };
  std::map<FunctionId, std::map<int, Samples>> samples_;
};

struct FidelityFigures {
  double slo_attainment = 0;
  double gpu_seconds = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};
FidelityFigures FiguresOf(const PolicyReport& report);

struct FidelityReport {
  std::string policy;
  std::uint64_t requests = 0;  // compared: the live requests of the last two thirds
  FidelityFigures live;
  FidelityFigures sim;
  std::vector<std::string> profiles_from_catalog;  // functions no run taught anything
};

// The fidelity.json layout: {"policy", "requests", "live": {...}, "sim": {...},
// "relative_error": {"gpu_seconds", "p50_ms", "p99_ms"}, "slo_attainment_diff",
// "profiles_from_catalog": [...]}. A relative error whose live figure is 0 is null.
std::string FidelityJson(const FidelityReport& report);

}  // namespace gshare
