#include "gshare/cli/sim_inputs.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string_view>

#include "gshare/sched/policy_registry.h"
#include "gshare/sim/workload/model_catalog.h"

namespace gshare::cli {

void AddTraceSourceOptions(CLI::App* cmd, TraceSource& source, std::vector<std::string>& policies) {
  CLI::Option* catalog = cmd->add_option(
      "--catalog", source.catalog, "Function catalog (YAML); with --trace, unless --generate");
  CLI::Option* trace = cmd->add_option("--trace", source.trace, "Trace file");
  CLI::Option* format = cmd->add_option("--trace-format", source.trace_format,
                                        "invocations, azure-2019, azure-2021 or azure-llm")
                            ->capture_default_str();
  CLI::Option* function = cmd->add_option(
      "--function", source.function,
      "azure-llm: the catalog function the arrivals belong to (default: the first)");
  cmd->add_option("--generate", source.generate,
                  "Instead of --catalog and --trace: functions=N,duration=D[,slo-factor=F]"
                  "[,regime=R][,batching=off], the workload `gshare workload --functions N "
                  "--duration D --slo-factor F --regime R [--no-batching] --seed S` writes, "
                  "generated for each seed S")
      ->excludes(catalog)
      ->excludes(trace)
      ->excludes(format)
      ->excludes(function);
  cmd->add_option("--gpu-type", source.gpu_type, "GPU type of every GPU")->capture_default_str();
  cmd->add_option("--policy", policies, "Policies to compare, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
}

void AddWorldOptions(CLI::App* cmd, WorldFlags& world) {
  CLI::Option* nodes =
      cmd->add_option("--gpus-per-node", world.gpus_per_node,
                      "GPUs per host node: the copies on a node share its host bandwidth")
          ->check(CLI::Range(1, 1024))
          ->capture_default_str();
  CLI::Option* host =
      cmd->add_option("--host-bandwidth", world.host_bandwidth,
                      "Host-memory bandwidth of a node, shared by its concurrent restores and "
                      "checkpoints (each also bounded by its GPU's link)")
          ->capture_default_str();
  CLI::Option* noise = cmd->add_option("--restore-noise", world.restore_noise,
                                       "Noise on each restore and checkpoint time: none, "
                                       "lognormal:SIGMA[,straggler:P:X] (drawn with the seed)")
                           ->capture_default_str();
  CLI::Option* prior =
      cmd->add_option("--prior-error", world.prior_error,
                      "Each function's profile, as the policies see it, is off by a factor "
                      "uniform in [1-E, 1+E] drawn per function and seed; they learn from runs")
          ->check(CLI::Range(0.0, 0.9))
          ->capture_default_str();
  CLI::Option* fragmentation =
      cmd->add_option("--fragmentation", world.fragmentation,
                      "on: a slice occupies a contiguous range of its GPU's memory (first fit; "
                      "growth in place, else a move, else refused); off: any free memory holds it")
          ->capture_default_str();
  cmd->add_flag("--ideal", world.ideal,
                "The ideal world instead: exact restore times, no host contention, exact priors, "
                "memory never fragmented "
                "(for comparison with earlier figures; never the default)")
      ->excludes(nodes)
      ->excludes(host)
      ->excludes(noise)
      ->excludes(prior)
      ->excludes(fragmentation);
}

Result<WorldModel> MakeWorld(const WorldFlags& flags) {
  if (flags.ideal) return WorldModel{};
  WorldModel world;
  world.gpus_per_node = flags.gpus_per_node;
  std::string_view host = flags.host_bandwidth;
  if (host.ends_with("/s")) host.remove_suffix(2);
  auto bytes = ParseBytes(host);
  if (!bytes.ok() || *bytes == 0) {
    return InvalidArgument(
        fmt::format("--host-bandwidth: '{}' is not a positive size per second (e.g. 50GB/s)",
                    flags.host_bandwidth));
  }
  world.host_bytes_per_second = static_cast<double>(*bytes);
  auto noise = ParseExecNoise(flags.restore_noise);
  if (!noise.ok()) return noise.status().WithContext("--restore-noise");
  world.restore_noise = *noise;
  world.prior_error = flags.prior_error;
  if (flags.fragmentation != "on" && flags.fragmentation != "off") {
    return InvalidArgument(
        fmt::format("--fragmentation: '{}' is neither on nor off", flags.fragmentation));
  }
  world.fragmentation = flags.fragmentation == "on";
  return world;
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

namespace {

// The longest workload --generate makes: a week.
constexpr Duration kMaxGeneratedDuration = std::chrono::hours(24 * 7);

Result<GeneratorOptions> ParseGenerateSpec(std::string_view spec) {
  GeneratorOptions options;
  bool functions = false;
  bool duration = false;
  bool slo_factor = false;
  bool regime = false;
  bool batching = false;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(fmt::format("'{}': expected KEY=VALUE", item));
    }
    const std::string_view key = item.substr(0, eq);
    const std::string value(item.substr(eq + 1));
    if ((key == "functions" && functions) || (key == "duration" && duration) ||
        (key == "slo-factor" && slo_factor) || (key == "regime" && regime) ||
        (key == "batching" && batching)) {
      return InvalidArgument(fmt::format("'{}' is given twice", key));
    }
    if (key == "functions") {
      std::int64_t n = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size()) {
        return InvalidArgument(fmt::format("functions: '{}' is not a whole number", value));
      }
      if (n < 1 || n > 1'000'000) {
        return InvalidArgument(fmt::format("functions: '{}' is outside [1, 1000000]", value));
      }
      options.functions = static_cast<int>(n);
      functions = true;
    } else if (key == "duration") {
      auto parsed = ParseDuration(value);
      if (!parsed.ok()) return parsed.status().WithContext("duration");
      options.duration = *parsed;
      if (options.duration <= Duration::zero() || options.duration > kMaxGeneratedDuration) {
        return InvalidArgument(fmt::format("duration: '{}' is outside (0, 7d]", value));
      }
      duration = true;
    } else if (key == "slo-factor") {
      double f = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), f);
      if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(f) || f < 1 ||
          f > 100) {
        return InvalidArgument(fmt::format("slo-factor: '{}' is not a number in [1, 100]", value));
      }
      options.slo_factor = f;
      slo_factor = true;
    } else if (key == "regime") {
      auto parsed = ParseWorkloadRegime(value);
      if (!parsed.ok()) return parsed.status().WithContext("regime");
      options.regime = *parsed;
      regime = true;
    } else if (key == "batching") {
      if (value != "on" && value != "off") {
        return InvalidArgument(fmt::format("batching: '{}' is neither on nor off", value));
      }
      options.batching = value == "on";
      batching = true;
    } else {
      return InvalidArgument(fmt::format(
          "unknown key '{}' (known: functions, duration, slo-factor, regime, batching)", key));
    }
  }
  if (!functions || !duration) {
    return InvalidArgument(
        "expected functions=N,duration=D[,slo-factor=F][,regime=compute|memory][,batching=on|off]");
  }
  return options;
}

}  // namespace

Result<WorkloadReader> WorkloadReader::Open(const TraceSource& source) {
  WorkloadReader reader;
  reader.source_ = source;
  if (!source.generate.empty()) {
    auto spec = ParseGenerateSpec(source.generate);
    if (!spec.ok()) return spec.status().WithContext("--generate");
    reader.generator_ = std::move(spec).value();
    reader.generated_ = true;
    // A generated catalog has the GPU types of the built-in profiles.
    GSHARE_ASSIGN_OR_RETURN(reader.catalog_, BuiltinModelCatalog());
  } else {
    if (source.catalog.empty() || source.trace.empty()) {
      return InvalidArgument("--catalog and --trace are required (or --generate)");
    }
    GSHARE_ASSIGN_OR_RETURN(reader.catalog_, LoadCatalog(source.catalog));
  }
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
  if (generated_) {
    GeneratorOptions options = generator_;
    options.seed = seed;
    GSHARE_ASSIGN_OR_RETURN(GeneratedWorkload generated, GenerateWorkload(options));
    GSHARE_ASSIGN_OR_RETURN(Workload workload,
                            BuildWorkload(generated.catalog, generated.trace, gpu_));
    workload.trace_path = fmt::format("generated:{}", source_.generate);
    workload.trace_format = "generated";
    DrawExecNoise(noise, seed, workload);
    return workload;
  }
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
