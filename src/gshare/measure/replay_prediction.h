// The simulator's prediction of a replay against a running gshare serve: the same requests on the
// server's own node, as it describes itself (GET /api/v1/node, the admin's): its policy, its GPUs
// and their memory, link and fixed restore cost, its slice granularity. Functions are resolved for
// that GPU as the server resolves them, each with one instance warm in host memory (a deployed
// function stays loaded). Profiles are the catalog's: the prediction knows what the server was
// told, not what it learned.
#pragma once

#include <string>

#include "gshare/common/slice_granularity.h"
#include "gshare/measure/replay_server.h"
#include "gshare/model/gpu_type.h"
#include "gshare/sim/report.h"
#include "gshare/sim/workload/workload.h"

namespace gshare::measure {

struct NodeDescription {
  std::string policy;
  int gpus = 0;
  SliceGranularity slice_granularity;
  GpuType gpu;
};

// GET /api/v1/node with the admin key; every figure checked (finite, in range).
Result<NodeDescription> DescribeNode(ServerApi& api, const std::string& admin_key);

// Simulates `workload`'s requests (the replayed ones, on the replay's clock) on `node`, with
// `specs` (by FunctionId) resolved for its GPU. The report's policy is "sim-<policy>".
Result<PolicyReport> PredictReplay(const Workload& workload, const std::vector<FunctionSpec>& specs,
                                   const std::vector<GpuType>& known_types,
                                   const NodeDescription& node);

}  // namespace gshare::measure
