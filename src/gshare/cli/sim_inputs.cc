#include "gshare/cli/sim_inputs.h"

#include <fmt/format.h>

#include "gshare/sched/policy_registry.h"

namespace gshare::cli {

void AddTraceSourceOptions(CLI::App* cmd, TraceSource& source, std::vector<std::string>& policies) {
  cmd->add_option("--catalog", source.catalog, "Function catalog (YAML)")->required();
  cmd->add_option("--trace", source.trace, "Trace file")->required();
  cmd->add_option("--trace-format", source.trace_format,
                  "invocations, azure-2019, azure-2021 or azure-llm")
      ->capture_default_str();
  cmd->add_option("--function", source.function,
                  "azure-llm: the catalog function the arrivals belong to (default: the first)");
  cmd->add_option("--gpu-type", source.gpu_type, "GPU type of every GPU")->capture_default_str();
  cmd->add_option("--policy", policies, "Policies to compare, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
}

Status CheckPolicyNames(const std::vector<std::string>& policies) {
  for (const auto& policy : policies) {
    bool known = false;
    for (auto name : PolicyNames()) known = known || name == policy;
    if (!known) {
      return NotFound(
          fmt::format("unknown policy '{}' (known: {})", policy, fmt::join(PolicyNames(), ", ")));
    }
  }
  return Status::Ok();
}

Result<WorkloadReader> WorkloadReader::Open(const TraceSource& source) {
  WorkloadReader reader;
  reader.source_ = source;
  GSHARE_ASSIGN_OR_RETURN(reader.catalog_, LoadCatalog(source.catalog));
  GSHARE_ASSIGN_OR_RETURN(reader.format_, ParseTraceFormat(source.trace_format));
  const GpuType* gpu = reader.catalog_.FindGpuType(source.gpu_type);
  if (gpu == nullptr) {
    std::string known;
    for (const auto& t : reader.catalog_.gpu_types) known += (known.empty() ? "" : ", ") + t.name;
    return NotFound(fmt::format("unknown GPU type '{}' (known: {})", source.gpu_type, known));
  }
  reader.gpu_ = *gpu;
  return reader;
}

Result<Workload> WorkloadReader::Read(std::uint64_t seed, const ExecNoise& noise) const {
  Catalog catalog = catalog_;
  TraceOptions options;
  options.seed = seed;
  options.function = source_.function;
  GSHARE_ASSIGN_OR_RETURN(RawTrace raw, ReadTrace(source_.trace, format_, catalog, options));
  GSHARE_ASSIGN_OR_RETURN(Workload workload, BuildWorkload(catalog, raw, gpu_));
  workload.trace_path = source_.trace;
  workload.trace_format = std::string(TraceFormatName(format_));
  DrawExecNoise(noise, seed, workload);
  return workload;
}

}  // namespace gshare::cli
