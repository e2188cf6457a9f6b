#include "gshare/measure/replay_prediction.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "gshare/sim/simulator.h"

namespace gshare::measure {
namespace {

using Json = nlohmann::json;

Result<double> Number(const Json& object, const char* field, double lo, double hi) {
  auto it = object.find(field);
  if (it == object.end() || !it->is_number()) {
    return InvalidArgument(fmt::format("the node's description has no number '{}'", field));
  }
  const double value = it->get<double>();
  if (!std::isfinite(value) || value < lo || value > hi) {
    return InvalidArgument(fmt::format("the node's description gives {} = {}, outside [{}, {}]",
                                       field, value, lo, hi));
  }
  return value;
}

}  // namespace

Result<NodeDescription> DescribeNode(ServerApi& api, const std::string& admin_key) {
  GSHARE_ASSIGN_OR_RETURN(net::ClientResponse response, api.Call("GET", "/api/v1/node", admin_key));
  if (response.status != 200) return ServerApi::Refused("describing the node", response);
  const Json body = Json::parse(response.body, nullptr, false);
  if (!body.is_object() || !body.contains("gpu_type") || !body["gpu_type"].is_object() ||
      !body.contains("policy") || !body["policy"].is_string()) {
    return InvalidArgument(
        "the node's description (GET /api/v1/node) is not what gshare serve "
        "writes");
  }
  NodeDescription node;
  node.policy = body["policy"].get<std::string>();
  GSHARE_ASSIGN_OR_RETURN(const double gpus, Number(body, "gpus", 1, 1024));
  node.gpus = static_cast<int>(gpus);
  GSHARE_ASSIGN_OR_RETURN(const double granularity,
                          Number(body, "slice_granularity_bytes", 1, 1ULL << 40));
  GSHARE_ASSIGN_OR_RETURN(node.slice_granularity,
                          SliceGranularity::FromBytes(static_cast<std::uint64_t>(granularity)));
  const Json& gpu = body["gpu_type"];
  node.gpu.name = gpu.value("name", "node");
  node.gpu.description = "the server's GPUs";
  GSHARE_ASSIGN_OR_RETURN(const double memory, Number(gpu, "memory_bytes", 1, 1ULL << 44));
  node.gpu.memory_bytes = static_cast<std::uint64_t>(memory);
  GSHARE_ASSIGN_OR_RETURN(node.gpu.h2d_bytes_per_second,
                          Number(gpu, "h2d_bytes_per_second", 1, 1e13));
  GSHARE_ASSIGN_OR_RETURN(const double overhead, Number(gpu, "restore_overhead_seconds", 0, 60));
  node.gpu.restore_overhead =
      std::chrono::duration_cast<Duration>(std::chrono::duration<double>(overhead));
  GSHARE_ASSIGN_OR_RETURN(node.gpu.price_per_hour_usd, Number(gpu, "price_per_hour_usd", 0, 1e6));
  node.gpu.relative_latency = 1.0;
  return node;
}

Result<PolicyReport> PredictReplay(const Workload& workload, const std::vector<FunctionSpec>& specs,
                                   const std::vector<GpuType>& known_types,
                                   const NodeDescription& node) {
  Workload predicted;
  predicted.gpu = node.gpu;
  predicted.trace_path = workload.trace_path;
  predicted.trace_format = workload.trace_format;
  for (const FunctionSpec& spec : specs) {
    GSHARE_ASSIGN_OR_RETURN(ResolvedFunction resolved,
                            ResolveFunction(spec, node.gpu, known_types));
    resolved.min_instances = std::max(1, resolved.min_instances);  // as the server keeps it
    predicted.functions.push_back(std::move(resolved));
  }
  for (Request request : workload.requests) {
    request.deadline = request.arrival + predicted.functions.at(request.function).slo;
    request.latest_start = request.deadline;  // as the server cancels it (504) when it passes
    predicted.requests.push_back(request);
  }
  SimulationOptions options;
  options.policy.instance_start = Duration::zero();  // the node's GPUs are there
  options.policy.slice_granularity = node.slice_granularity;
  options.executor.max_gpus = node.gpus;
  GSHARE_ASSIGN_OR_RETURN(PolicyReport report, Simulate(predicted, node.policy, options));
  report.policy = "sim-" + node.policy;
  return report;
}

}  // namespace gshare::measure
