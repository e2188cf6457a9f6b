// Workload: what one simulation replays: functions resolved for one GPU type, and requests.
#pragma once

#include <string>
#include <vector>

#include "gshare/model/function_spec.h"
#include "gshare/model/gpu_type.h"
#include "gshare/model/request.h"

namespace gshare {

struct Workload {
  GpuType gpu;                              // every GPU in the run is of this type
  std::vector<ResolvedFunction> functions;  // FunctionId indexes this
  std::vector<Request> requests;            // sorted by arrival; requests[i].id == i
  // The execution time each request draws (by RequestId; zero: the profile's), from the trace's
  // durations; empty when the trace has none. Only the simulated executor reads it: policies
  // never see it.
  std::vector<Duration> exec_times;
  // Each request's execution-noise factor (by RequestId; a batch runs for its latency times the
  // mean factor of its requests), drawn by DrawExecNoise; empty without noise. Only the simulated
  // executor reads it.
  std::vector<float> exec_factors;
  std::string trace_path;    // for the report
  std::string trace_format;  // for the report
};

}  // namespace gshare
