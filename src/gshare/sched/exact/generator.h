// GenerateExactInstance: seeded small random instances for the exact solver and the
// optimality-gap study.
//
// The caller supplies the function profiles (ResolvedFunction: model bytes, GPU memory,
// batch-1 execution time, SLO on one GPU type) and the GPU type; the generator draws which
// functions are called and when. The same seed and inputs give the same instance on every
// platform (gshare::Random). Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/model/function_spec.h"
#include "gshare/model/gpu_type.h"
#include "gshare/sched/exact/instance.h"

namespace gshare::exact {

struct GeneratorOptions {
  // Number of distinct functions drawn (without replacement) from the profiles; each request
  // then calls one of them uniformly. 0 means all profiles.
  int functions_per_instance = 4;
  // Offered load: arrivals are a Poisson process whose mean gap is the mean (restore + execution)
  // time of the drawn functions divided by (load x GPUs).
  double load = 0.5;
  // A request's deadline is release + max(SLO, slo_floor x (restore + execution)): an SLO tighter
  // than a cold start would make the instance infeasible whenever no copy is resident.
  double slo_floor = 2.0;
  // The "hot" class (gshare optgap --class hot): the first drawn function is hot (each request
  // calls it with probability 1/2, else one of all the drawn functions uniformly), and every
  // other drawn function, the hot one first, is at risk: its deadline is release + x (restore +
  // execution) with x uniform in [1.2, 1.8] drawn per function, under slo_floor's two cold
  // starts, so a request of it meets its deadline only if its slice is resident or its restore
  // starts at once: the cache queue of DQLS (keeping at-risk slices) is scored. The default
  // class draws nothing more, so its instances are as before.
  bool hot = false;
};

// Errors: InvalidArgument when num_requests < 1, num_gpus < 1, no profiles, a profile without a
// positive batch-1 latency, or options out of range.
Result<ExactInstance> GenerateExactInstance(std::uint64_t seed, int num_requests, int num_gpus,
                                            const std::vector<ResolvedFunction>& functions,
                                            const GpuType& gpu,
                                            const GeneratorOptions& options = {});

// Five profiles on a100-40gb, rounded copies of data/examples/small-catalog.yaml (resnet50,
// mobilenet, vit-base, convnext-large, vit-huge), with SLOs of 1.5 x execution time where the
// catalog leaves the SLO to its default. For tests.
std::vector<ResolvedFunction> SampleFunctions();
// The a100-40gb figures of data/gpu-types.yaml that the exact model uses (memory, link
// bandwidth, restore overhead).
GpuType SampleGpu();

}  // namespace gshare::exact
