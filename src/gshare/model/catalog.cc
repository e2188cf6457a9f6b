#include "gshare/model/catalog.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "gshare/common/log.h"
#include "gshare/model/builtin_gpu_types.h"

namespace gshare {
namespace {

// Where a value sits, for error messages: "catalog.yaml: functions[3] (resnet50): model_size".
struct Where {
  std::string_view source;
  std::string entry;
};

std::string LineSuffix(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null() || mark.line < 0) return "";
  return fmt::format(" (line {})", mark.line + 1);
}

Status FieldError(const Where& where, std::string_view field, const YAML::Node& node,
                  std::string_view message) {
  return InvalidArgument(
      fmt::format("{}: {}: {}: {}{}", where.source, where.entry, field, message, LineSuffix(node)));
}

// Every text in a catalog: a single value, without NUL bytes, of at most `max_bytes`.
Result<std::string> ScalarText(const Where& where, std::string_view field, const YAML::Node& node,
                               std::size_t max_bytes = kMaxEnvValueBytes) {
  if (!node.IsScalar()) return FieldError(where, field, node, "expected a single value");
  const std::string& text = node.Scalar();
  if (text.find('\0') != std::string::npos) {
    return FieldError(where, field, node, "must not contain a NUL byte");
  }
  if (text.size() > max_bytes) {
    return FieldError(where, field, node,
                      fmt::format("is {} bytes long; at most {}", text.size(), max_bytes));
  }
  return text;
}

// A name-like text: name, tenant, model, a GPU type, a runtime.
Result<std::string> NameText(const Where& where, std::string_view field, const YAML::Node& node) {
  return ScalarText(where, field, node, kMaxNameBytes);
}

Result<std::uint64_t> BytesField(const Where& where, std::string_view field,
                                 const YAML::Node& node) {
  GSHARE_ASSIGN_OR_RETURN(std::string text, ScalarText(where, field, node));
  auto bytes = ParseBytes(text);
  if (!bytes.ok()) return FieldError(where, field, node, bytes.status().message());
  return *bytes;
}

Result<Duration> PositiveDurationField(const Where& where, std::string_view field,
                                       const YAML::Node& node) {
  GSHARE_ASSIGN_OR_RETURN(std::string text, ScalarText(where, field, node));
  auto duration = ParseDuration(text);
  if (!duration.ok()) return FieldError(where, field, node, duration.status().message());
  if (*duration <= Duration::zero()) {
    return FieldError(where, field, node, fmt::format("'{}' must be positive", text));
  }
  return *duration;
}

// The largest plain number a catalog field takes (prices, ratios, scales): larger is a typo.
constexpr double kMaxCatalogNumber = 1e6;

Result<double> NumberField(const Where& where, std::string_view field, const YAML::Node& node) {
  GSHARE_ASSIGN_OR_RETURN(std::string text, ScalarText(where, field, node));
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return FieldError(where, field, node, fmt::format("'{}' is not a number", text));
  }
  return value;
}

Result<int> IntegerField(const Where& where, std::string_view field, const YAML::Node& node) {
  GSHARE_ASSIGN_OR_RETURN(std::string text, ScalarText(where, field, node));
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return FieldError(where, field, node, fmt::format("'{}' is not an integer", text));
  }
  return value;
}

const GpuType* FindType(const std::vector<GpuType>& types, std::string_view name) {
  for (const auto& type : types) {
    if (type.name == name) return &type;
  }
  return nullptr;
}

std::string EntryName(std::string_view list, std::size_t index, const YAML::Node& item) {
  const YAML::Node name = item.IsMap() ? item["name"] : YAML::Node();
  if (name && name.IsScalar() && !name.Scalar().empty()) {
    return fmt::format("{}[{}] ({})", list, index, name.Scalar());
  }
  return fmt::format("{}[{}]", list, index);
}

Result<GpuType> ParseGpuType(const Where& where, const YAML::Node& item) {
  if (!item.IsMap()) return FieldError(where, "entry", item, "expected a map of fields");
  GpuType type;
  const YAML::Node name = item["name"];
  if (!name) return FieldError(where, "name", item, "missing");
  GSHARE_ASSIGN_OR_RETURN(type.name, NameText(where, "name", name));
  if (type.name.empty()) return FieldError(where, "name", name, "must not be empty");
  if (const YAML::Node n = item["description"]) {
    GSHARE_ASSIGN_OR_RETURN(type.description, ScalarText(where, "description", n));
  }
  const YAML::Node memory = item["memory"];
  if (!memory) return FieldError(where, "memory", item, "missing");
  GSHARE_ASSIGN_OR_RETURN(type.memory_bytes, BytesField(where, "memory", memory));
  if (type.memory_bytes == 0) return FieldError(where, "memory", memory, "must be positive");
  if (const YAML::Node n = item["h2d_bandwidth"]) {
    GSHARE_ASSIGN_OR_RETURN(const std::uint64_t bandwidth, BytesField(where, "h2d_bandwidth", n));
    type.h2d_bytes_per_second = static_cast<double>(bandwidth);
  }
  if (const YAML::Node n = item["restore_overhead"]) {
    GSHARE_ASSIGN_OR_RETURN(std::string text, ScalarText(where, "restore_overhead", n));
    auto overhead = ParseDuration(text);
    if (!overhead.ok()) {
      return FieldError(where, "restore_overhead", n, overhead.status().message());
    }
    type.restore_overhead = *overhead;
  }
  struct NonNegative {
    const char* field;
    double* value;
    bool strictly_positive;
  };
  const NonNegative numbers[] = {
      {"price_per_hour", &type.price_per_hour_usd, false},
      {"relative_latency", &type.relative_latency, true},
      {"serverless_cu_active", &type.serverless_cu_active, false},
      {"serverless_cu_idle", &type.serverless_cu_idle, false},
      {"serverless_usd_per_cu", &type.serverless_usd_per_cu, false},
  };
  for (const auto& number : numbers) {
    const YAML::Node n = item[number.field];
    if (!n) continue;
    GSHARE_ASSIGN_OR_RETURN(*number.value, NumberField(where, number.field, n));
    if (*number.value < 0 || (number.strictly_positive && *number.value == 0)) {
      return FieldError(where, number.field, n,
                        number.strictly_positive ? "must be positive" : "must not be negative");
    }
    if (*number.value > kMaxCatalogNumber) {
      return FieldError(where, number.field, n, "must be at most 1e6");
    }
  }
  if (const YAML::Node n = item["price_source"]) {
    GSHARE_ASSIGN_OR_RETURN(type.price_source, ScalarText(where, "price_source", n));
  }
  if (const YAML::Node n = item["batch_scaling"]) {
    if (!n.IsSequence() || n.size() == 0) {
      return FieldError(where, "batch_scaling", n, "expected a non-empty list of numbers");
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      const std::string field = fmt::format("batch_scaling[{}]", i);
      GSHARE_ASSIGN_OR_RETURN(const double scale, NumberField(where, field, n[i]));
      if (scale <= 0 || scale > kMaxCatalogNumber) {
        return FieldError(where, field, n[i], "must be positive and at most 1e6");
      }
      type.batch_scaling.push_back(scale);
    }
  }
  return type;
}

// Parses one latency table value: a latency (batch 1) or a map batch -> latency with batch 1.
Result<BatchLatency> ParseBatchLatency(const Where& where, const std::string& field,
                                       const YAML::Node& node) {
  BatchLatency table;
  if (node.IsScalar()) {
    GSHARE_ASSIGN_OR_RETURN(table.by_batch[1], PositiveDurationField(where, field, node));
    return table;
  }
  if (!node.IsMap() || node.size() == 0) {
    return FieldError(where, field, node, "expected a latency or a map batch -> latency");
  }
  for (const auto& entry : node) {
    GSHARE_ASSIGN_OR_RETURN(const int batch, IntegerField(where, field + " batch", entry.first));
    if (batch < 1) return FieldError(where, field, entry.first, "batch sizes start at 1");
    const std::string batch_field = fmt::format("{}[{}]", field, batch);
    GSHARE_ASSIGN_OR_RETURN(table.by_batch[batch],
                            PositiveDurationField(where, batch_field, entry.second));
  }
  if (!table.by_batch.contains(1)) {
    return FieldError(where, field, node, "the batch-1 latency is missing");
  }
  return table;
}

// A POSIX environment name: a letter or '_', then letters, digits and '_' (so no '=' or NUL).
bool IsEnvName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A path field: absolute, or relative to `base_dir` (the catalog file's folder), made absolute
// and lexically normal.
Result<std::string> PathField(const Where& where, std::string_view field, const YAML::Node& node,
                              const std::filesystem::path& base_dir) {
  GSHARE_ASSIGN_OR_RETURN(const std::string text, ScalarText(where, field, node, kMaxPathBytes));
  if (text.empty()) return FieldError(where, field, node, "must not be empty");
  std::filesystem::path path(text);
  if (path.is_relative()) {
    if (base_dir.empty()) {
      return FieldError(where, field, node,
                        fmt::format("'{}' is relative, and this catalog was not read from a file "
                                    "whose folder it could be relative to",
                                    text));
    }
    path = base_dir / path;
  }
  std::string resolved = path.lexically_normal().string();
  if (resolved.size() > kMaxPathBytes) {
    return FieldError(
        where, field, node,
        fmt::format("resolves to a path of {} bytes; at most {}", resolved.size(), kMaxPathBytes));
  }
  return resolved;
}

// `inputs:` or `outputs:`: a list of {name, datatype, shape}.
Result<std::vector<TensorSpec>> ParseTensorSpecs(const Where& where, std::string_view field,
                                                 const YAML::Node& list, bool batched) {
  if (!list.IsSequence()) {
    return FieldError(where, field, list, "expected a list of {name, datatype, shape}");
  }
  if (list.size() > kMaxTensorSpecs) {
    return FieldError(where, field, list,
                      fmt::format("has {} tensors; at most {}", list.size(), kMaxTensorSpecs));
  }
  std::vector<TensorSpec> specs;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node entry = list[i];
    const std::string at = fmt::format("{}[{}]", field, i);
    if (!entry.IsMap()) return FieldError(where, at, entry, "expected {name, datatype, shape}");
    for (const auto& key : entry) {
      const std::string name = key.first.IsScalar() ? key.first.Scalar() : "";
      if (name != "name" && name != "datatype" && name != "shape") {
        return FieldError(
            where, at, key.first,
            fmt::format("unknown field '{}' (a tensor has name, datatype, shape)", name));
      }
    }
    TensorSpec spec;
    const YAML::Node name = entry["name"];
    if (!name) return FieldError(where, at + ".name", entry, "missing");
    GSHARE_ASSIGN_OR_RETURN(spec.name, ScalarText(where, at + ".name", name, kMaxTensorNameBytes));
    const YAML::Node datatype = entry["datatype"];
    if (!datatype) return FieldError(where, at + ".datatype", entry, "missing");
    GSHARE_ASSIGN_OR_RETURN(const std::string type_name,
                            ScalarText(where, at + ".datatype", datatype, kMaxNameBytes));
    auto type = ParseDataType(type_name);
    if (!type.ok()) return FieldError(where, at + ".datatype", datatype, type.status().message());
    spec.datatype = *type;
    const YAML::Node shape = entry["shape"];
    if (!shape) return FieldError(where, at + ".shape", entry, "missing");
    if (!shape.IsSequence() || shape.size() > kMaxTensorSpecRank) {
      return FieldError(where, at + ".shape", shape,
                        fmt::format("expected a list of 1 to {} dimensions", kMaxTensorSpecRank));
    }
    for (std::size_t d = 0; d < shape.size(); ++d) {
      GSHARE_ASSIGN_OR_RETURN(const std::string text,
                              ScalarText(where, at + ".shape", shape[d], kMaxNameBytes));
      std::int64_t dim = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), dim);
      if (error != std::errc() || end != text.data() + text.size()) {
        return FieldError(where, at + ".shape", shape[d],
                          fmt::format("'{}' is not an integer", text));
      }
      spec.shape.push_back(dim);
    }
    specs.push_back(std::move(spec));
  }
  if (Status checked = CheckTensorSpecs(specs, field, batched); !checked.ok()) {
    return FieldError(where, field, list, checked.message());
  }
  return specs;
}

// The fields that say how a live node starts the function (see FunctionSpec).
Status ParseProcessFields(const Where& where, const YAML::Node& item,
                          const std::filesystem::path& base_dir, FunctionSpec& spec) {
  const YAML::Node command = item["command"];
  if (command) {
    if (!command.IsSequence()) {
      return FieldError(where, "command", command,
                        "expected a list: the program, then its arguments");
    }
    if (command.size() == 0) return FieldError(where, "command", command, "must name a program");
    if (command.size() > kMaxCommandArguments) {
      return FieldError(
          where, "command", command,
          fmt::format("has {} items; at most {}", command.size(), kMaxCommandArguments));
    }
    for (std::size_t i = 0; i < command.size(); ++i) {
      const std::string field = fmt::format("command[{}]", i);
      GSHARE_ASSIGN_OR_RETURN(std::string argument,
                              ScalarText(where, field, command[i], kMaxArgumentBytes));
      if (i == 0 && argument.empty()) {
        return FieldError(where, field, command[i], "the program must not be empty");
      }
      spec.command.push_back(std::move(argument));
    }
  }
  const YAML::Node runtime = item["runtime"];
  if (runtime) {
    if (command) return FieldError(where, "runtime", runtime, "give command or runtime, not both");
    GSHARE_ASSIGN_OR_RETURN(spec.runtime, NameText(where, "runtime", runtime));
    if (std::find(kBundledRuntimes.begin(), kBundledRuntimes.end(), spec.runtime) ==
        kBundledRuntimes.end()) {
      return FieldError(where, "runtime", runtime,
                        fmt::format("unknown runtime '{}' (bundled: {})", spec.runtime,
                                    fmt::join(kBundledRuntimes, ", ")));
    }
  }
  // The other process fields mean nothing without a process to start.
  for (const char* field : {"env", "working_dir", "model_files", "timeout", "host_memory", "inputs",
                            "outputs", "threads", "switch"}) {
    if (const YAML::Node n = item[field]; n && !spec.IsLive()) {
      return FieldError(where, field, n,
                        "needs a command or a runtime (a function without either is "
                        "simulation-only)");
    }
  }
  if (const YAML::Node env = item["env"]) {
    if (!env.IsMap()) return FieldError(where, "env", env, "expected a map of name: value");
    if (env.size() > kMaxEnvEntries) {
      return FieldError(where, "env", env,
                        fmt::format("has {} entries; at most {}", env.size(), kMaxEnvEntries));
    }
    for (const auto& entry : env) {
      GSHARE_ASSIGN_OR_RETURN(std::string name,
                              ScalarText(where, "env name", entry.first, kMaxEnvNameBytes));
      const std::string field = fmt::format("env.{}", name);
      if (!IsEnvName(name)) {
        return FieldError(where, field, entry.first,
                          fmt::format("'{}' is not an environment name (a letter or '_', then "
                                      "letters, digits and '_')",
                                      name));
      }
      if (name.starts_with(kReservedEnvPrefix)) {
        return FieldError(
            where, field, entry.first,
            fmt::format("names starting with {} are set by the node", kReservedEnvPrefix));
      }
      GSHARE_ASSIGN_OR_RETURN(std::string value, ScalarText(where, field, entry.second));
      if (!spec.env.emplace(std::move(name), std::move(value)).second) {
        return FieldError(where, field, entry.first, "appears twice");
      }
    }
  }
  if (const YAML::Node n = item["working_dir"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.working_dir, PathField(where, "working_dir", n, base_dir));
  }
  if (const YAML::Node files = item["model_files"]) {
    if (!files.IsSequence()) return FieldError(where, "model_files", files, "expected a list");
    if (files.size() > kMaxModelFiles) {
      return FieldError(where, "model_files", files,
                        fmt::format("has {} items; at most {}", files.size(), kMaxModelFiles));
    }
    for (std::size_t i = 0; i < files.size(); ++i) {
      GSHARE_ASSIGN_OR_RETURN(std::string path, PathField(where, fmt::format("model_files[{}]", i),
                                                          files[i], base_dir));
      spec.model_files.push_back(std::move(path));
    }
  }
  if (const YAML::Node n = item["timeout"]) {
    GSHARE_ASSIGN_OR_RETURN(const Duration timeout, PositiveDurationField(where, "timeout", n));
    if (timeout > kMaxRequestTimeout) {
      return FieldError(where, "timeout", n,
                        fmt::format("must be at most {}", FormatDuration(kMaxRequestTimeout)));
    }
    spec.timeout = timeout;
  }
  if (const YAML::Node n = item["host_memory"]) {
    GSHARE_ASSIGN_OR_RETURN(const std::uint64_t bytes, BytesField(where, "host_memory", n));
    if (bytes < kMinHostMemory || bytes > kMaxHostMemory) {
      return FieldError(where, "host_memory", n, "must be from 16Mi to 1Ti");
    }
    spec.host_memory_bytes = bytes;
  }
  for (const char* field : {"inputs", "outputs"}) {
    if (const YAML::Node list = item[field]) {
      GSHARE_ASSIGN_OR_RETURN(auto tensors,
                              ParseTensorSpecs(where, field, list, spec.max_batch > 1));
      (std::string_view(field) == "inputs" ? spec.inputs : spec.outputs) = std::move(tensors);
    }
  }
  if (const YAML::Node n = item["threads"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.threads, IntegerField(where, "threads", n));
    if (spec.threads < 1 || spec.threads > kMaxRuntimeThreads) {
      return FieldError(where, "threads", n,
                        fmt::format("must be between 1 and {}", kMaxRuntimeThreads));
    }
  }
  if (const YAML::Node n = item["switch"]) {
    GSHARE_ASSIGN_OR_RETURN(const std::string text, NameText(where, "switch", n));
    auto mechanism = ParseSwitchMechanism(text);
    if (!mechanism.ok()) return FieldError(where, "switch", n, mechanism.status().message());
    spec.switch_mechanism = *mechanism;
  }
  if (IsTenantCodeRuntime(spec.runtime)) {
    // The model is the tenant's files; what it takes and gives, the spec's.
    if (spec.runtime == "pytorch" && spec.model_files.size() != 1) {
      return FieldError(where, "model_files", item["runtime"],
                        "the pytorch runtime takes exactly one model file (its TorchScript)");
    }
    if (spec.runtime == "python" &&
        (spec.model_files.empty() || !spec.model_files.front().ends_with(".py"))) {
      return FieldError(where, "model_files", item["runtime"],
                        "the python runtime's first model file is its handler, a .py file");
    }
    if (spec.inputs.empty() || spec.outputs.empty()) {
      return FieldError(where, spec.inputs.empty() ? "inputs" : "outputs", item["runtime"],
                        fmt::format("the {} runtime needs the model's inputs and outputs declared",
                                    spec.runtime));
    }
    for (const auto* tensors : {&spec.inputs, &spec.outputs}) {
      for (const TensorSpec& tensor : *tensors) {
        // PyTorch 1.13 has no unsigned integers past 8 bits, and neither runtime takes strings.
        const DataType type = tensor.datatype;
        if (type == DataType::kBytes || type == DataType::kUint16 || type == DataType::kUint32 ||
            type == DataType::kUint64) {
          return FieldError(where, tensors == &spec.inputs ? "inputs" : "outputs", item["runtime"],
                            fmt::format("tensor '{}': the {} runtime takes no {}", tensor.name,
                                        spec.runtime, DataTypeName(type)));
        }
      }
    }
  }
  return Status::Ok();
}

// [A-Za-z0-9][A-Za-z0-9._-]*: safe as a file name and in a request path.
bool IsPlainName(std::string_view text) {
  if (text.empty() || !std::isalnum(static_cast<unsigned char>(text.front()))) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

Result<FunctionSpec> ParseFunction(const Where& where, const YAML::Node& item,
                                   const std::vector<GpuType>& types,
                                   const std::filesystem::path& base_dir,
                                   std::string_view default_tenant = kDefaultTenant) {
  if (!item.IsMap()) return FieldError(where, "entry", item, "expected a map of fields");
  FunctionSpec spec;
  const YAML::Node name = item["name"];
  if (!name) return FieldError(where, "name", item, "missing");
  GSHARE_ASSIGN_OR_RETURN(spec.name, NameText(where, "name", name));
  if (spec.name.empty()) return FieldError(where, "name", name, "must not be empty");
  spec.tenant = default_tenant;
  if (const YAML::Node n = item["tenant"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.tenant, NameText(where, "tenant", n));
    if (spec.tenant.empty()) return FieldError(where, "tenant", n, "must not be empty");
  }
  spec.model = spec.name;
  if (const YAML::Node n = item["model"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.model, NameText(where, "model", n));
  }
  const YAML::Node model_size = item["model_size"];
  if (!model_size) return FieldError(where, "model_size", item, "missing");
  GSHARE_ASSIGN_OR_RETURN(spec.model_bytes, BytesField(where, "model_size", model_size));
  spec.gpu_memory_bytes = spec.model_bytes;
  if (const YAML::Node n = item["gpu_memory"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.gpu_memory_bytes, BytesField(where, "gpu_memory", n));
    if (spec.gpu_memory_bytes < spec.model_bytes) {
      return FieldError(
          where, "gpu_memory", n,
          fmt::format("{} is smaller than model_size ({})", FormatBytes(spec.gpu_memory_bytes),
                      FormatBytes(spec.model_bytes)));
    }
  }
  if (spec.gpu_memory_bytes == 0) {
    return FieldError(where, "gpu_memory", item, "a function must hold some GPU memory");
  }
  if (const YAML::Node n = item["reference_gpu"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.reference_gpu, NameText(where, "reference_gpu", n));
    if (FindType(types, spec.reference_gpu) == nullptr) {
      return FieldError(where, "reference_gpu", n,
                        fmt::format("unknown GPU type '{}'", spec.reference_gpu));
    }
  }
  const YAML::Node latency = item["exec_latency"];
  if (!latency) return FieldError(where, "exec_latency", item, "missing");
  if (latency.IsScalar()) {
    GSHARE_ASSIGN_OR_RETURN(spec.exec_latency[spec.reference_gpu],
                            ParseBatchLatency(where, "exec_latency", latency));
  } else if (latency.IsMap() && latency.size() > 0) {
    for (const auto& entry : latency) {
      GSHARE_ASSIGN_OR_RETURN(const std::string gpu,
                              ScalarText(where, "exec_latency key", entry.first));
      const std::string field = fmt::format("exec_latency.{}", gpu);
      if (FindType(types, gpu) == nullptr) {
        return FieldError(where, field, entry.first, fmt::format("unknown GPU type '{}'", gpu));
      }
      GSHARE_ASSIGN_OR_RETURN(spec.exec_latency[gpu],
                              ParseBatchLatency(where, field, entry.second));
    }
  } else {
    return FieldError(where, "exec_latency", latency, "expected a latency or a map by GPU type");
  }
  if (const YAML::Node n = item["slo"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.slo, PositiveDurationField(where, "slo", n));
  }
  if (const YAML::Node n = item["slo_factor"]) {
    if (spec.slo) return FieldError(where, "slo_factor", n, "give slo or slo_factor, not both");
    GSHARE_ASSIGN_OR_RETURN(const double factor, NumberField(where, "slo_factor", n));
    if (factor < 1 || factor > 100) {
      return FieldError(where, "slo_factor", n, "must be between 1 and 100");
    }
    spec.slo_factor = factor;
  }
  if (const YAML::Node n = item["batch_memory"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.batch_memory_bytes, BytesField(where, "batch_memory", n));
  }
  if (const YAML::Node n = item["max_batch"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.max_batch, IntegerField(where, "max_batch", n));
    if (spec.max_batch < 1 || spec.max_batch > kMaxBatch) {
      return FieldError(where, "max_batch", n, fmt::format("must be between 1 and {}", kMaxBatch));
    }
  }
  if (const YAML::Node n = item["min_instances"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.min_instances, IntegerField(where, "min_instances", n));
    if (spec.min_instances < 0 || spec.min_instances > kMaxInstancesPerFunction) {
      return FieldError(where, "min_instances", n,
                        fmt::format("must be between 0 and {}", kMaxInstancesPerFunction));
    }
  }
  if (const YAML::Node n = item["max_instances"]) {
    GSHARE_ASSIGN_OR_RETURN(spec.max_instances, IntegerField(where, "max_instances", n));
    if (spec.max_instances < 0 || spec.max_instances > kMaxInstancesPerFunction) {
      return FieldError(
          where, "max_instances", n,
          fmt::format("must be between 0 (no bound) and {}", kMaxInstancesPerFunction));
    }
    if (spec.max_instances > 0 && spec.max_instances < std::max(1, spec.min_instances)) {
      return FieldError(where, "max_instances", n, "must be at least min_instances and 1");
    }
  }
  GSHARE_RETURN_IF_ERROR(ParseProcessFields(where, item, base_dir, spec));
  if (spec.IsLive()) {
    // A live node makes file names (logs) and request paths of these: plain names only.
    for (const auto& [field, value] :
         {std::pair<const char*, const std::string&>{"name", spec.name},
          {"tenant", spec.tenant},
          {"model", spec.model}}) {
      if (!IsPlainName(value)) {
        const YAML::Node n = item[field];
        return FieldError(where, field, n ? n : item,
                          fmt::format("'{}': a live function's {} is letters, digits, '.', '_' "
                                      "and '-', starting with a letter or digit",
                                      value, field));
      }
    }
  }
  return spec;
}

Result<Catalog> ParseCatalogNodes(const YAML::Node& root, std::string_view source,
                                  const std::vector<GpuType>& base_types,
                                  const std::filesystem::path& base_dir) {
  if (!root || root.IsNull())
    return InvalidArgument(fmt::format("{}: the document is empty", source));
  if (!root.IsMap()) {
    return InvalidArgument(fmt::format("{}: expected a map with 'functions' and/or 'gpu_types'{}",
                                       source, LineSuffix(root)));
  }
  Catalog catalog;
  catalog.gpu_types = base_types;
  if (const YAML::Node list = root["gpu_types"]) {
    if (!list.IsSequence()) {
      return InvalidArgument(
          fmt::format("{}: gpu_types: expected a list{}", source, LineSuffix(list)));
    }
    std::vector<std::string> seen;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Where where{source, EntryName("gpu_types", i, list[i])};
      GSHARE_ASSIGN_OR_RETURN(GpuType type, ParseGpuType(where, list[i]));
      if (std::find(seen.begin(), seen.end(), type.name) != seen.end()) {
        return FieldError(where, "name", list[i]["name"],
                          fmt::format("'{}' appears twice in gpu_types", type.name));
      }
      seen.push_back(type.name);
      auto existing = std::find_if(catalog.gpu_types.begin(), catalog.gpu_types.end(),
                                   [&](const GpuType& t) { return t.name == type.name; });
      if (existing != catalog.gpu_types.end()) {
        *existing = std::move(type);
      } else {
        catalog.gpu_types.push_back(std::move(type));
      }
    }
  }
  if (const YAML::Node list = root["functions"]) {
    if (!list.IsSequence() && !list.IsNull()) {
      return InvalidArgument(
          fmt::format("{}: functions: expected a list{}", source, LineSuffix(list)));
    }
    for (std::size_t i = 0; list.IsSequence() && i < list.size(); ++i) {
      const Where where{source, EntryName("functions", i, list[i])};
      GSHARE_ASSIGN_OR_RETURN(FunctionSpec spec,
                              ParseFunction(where, list[i], catalog.gpu_types, base_dir));
      if (catalog.FindFunction(spec.name) != nullptr) {
        return FieldError(where, "name", list[i]["name"],
                          fmt::format("'{}' is already used by an earlier function", spec.name));
      }
      GSHARE_RETURN_IF_ERROR(catalog.AddFunction(std::move(spec)));
    }
  }
  return catalog;
}

// Refuses YAML aliases (`*name`) before the text is loaded: a catalog or a spec needs none, and
// an alias makes a node share (or contain) another, so a walk of a few bytes of text could grow
// without bound (a node holding itself, or "billion laughs" chains).
class AliasRefuser final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    if (!alias) alias = mark;
  }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  std::optional<YAML::Mark> alias;
};

// Throws YAML::Exception for malformed text, as YAML::Load does.
Status CheckNoAliases(std::string_view yaml_text, std::string_view source) {
  std::istringstream stream{std::string(yaml_text)};
  YAML::Parser parser(stream);
  AliasRefuser refuser;
  // The first document only, as YAML::Load reads (the rest of a stream is never looked at).
  parser.HandleNextDocument(refuser);
  if (refuser.alias) {
    return InvalidArgument(fmt::format("{}:{}:{}: YAML aliases are not accepted", source,
                                       refuser.alias->line + 1, refuser.alias->column + 1));
  }
  return Status::Ok();
}

// A key given twice in one map: YAML forbids it, and yaml-cpp would keep one of the two without a
// word. Iterative, so that no nesting depth reaches the stack; the text has no alias (checked
// before), so every node is visited once.
Status CheckNoDuplicateKeys(const YAML::Node& root, std::string_view source) {
  std::vector<YAML::Node> pending{root};
  while (!pending.empty()) {
    const YAML::Node node = pending.back();
    pending.pop_back();
    if (node.IsSequence()) {
      for (const YAML::Node& element : node) pending.push_back(element);
    } else if (node.IsMap()) {
      std::set<std::string> keys;
      for (const auto& entry : node) {
        if (entry.first.IsScalar() && !keys.insert(entry.first.Scalar()).second) {
          const YAML::Mark mark = entry.first.Mark();
          return InvalidArgument(fmt::format("{}:{}:{}: key '{}' is given twice", source,
                                             mark.line + 1, mark.column + 1,
                                             entry.first.Scalar().substr(0, 128)));
        }
        pending.push_back(entry.second);
      }
    }
  }
  return Status::Ok();
}

Result<Catalog> ParseWithBase(std::string_view yaml_text, std::string_view source,
                              const std::vector<GpuType>& base_types,
                              const std::filesystem::path& base_dir) {
  try {
    GSHARE_RETURN_IF_ERROR(CheckNoAliases(yaml_text, source));
    const YAML::Node root = YAML::Load(std::string(yaml_text));
    GSHARE_RETURN_IF_ERROR(CheckNoDuplicateKeys(root, source));
    return ParseCatalogNodes(root, source, base_types, base_dir);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return InvalidArgument(fmt::format("{}: {}", source, e.msg));
    return InvalidArgument(
        fmt::format("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

Result<FunctionSpec> ParseEntryText(std::string_view yaml_text, std::string_view source,
                                    std::string_view default_tenant,
                                    const std::filesystem::path& base_dir) {
  try {
    GSHARE_RETURN_IF_ERROR(CheckNoAliases(yaml_text, source));
    const YAML::Node item = YAML::Load(std::string(yaml_text));
    if (!item || item.IsNull()) {
      return InvalidArgument(fmt::format("{}: the document is empty", source));
    }
    GSHARE_RETURN_IF_ERROR(CheckNoDuplicateKeys(item, source));
    const YAML::Node name = item.IsMap() ? item["name"] : YAML::Node();
    const Where where{source, name && name.IsScalar() && !name.Scalar().empty()
                                  ? fmt::format("function ({})", name.Scalar())
                                  : std::string("function")};
    return ParseFunction(where, item, BuiltinGpuTypes(), base_dir, default_tenant);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return InvalidArgument(fmt::format("{}: {}", source, e.msg));
    return InvalidArgument(
        fmt::format("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

// YAML scalars that must be quoted to stay strings.
bool NeedsQuotes(std::string_view text) {
  if (text.empty() || !std::isalpha(static_cast<unsigned char>(text.front()))) return true;
  for (const char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
        c != '/') {
      return true;
    }
  }
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}) {
    if (lower == word) return true;
  }
  return false;
}

std::string YamlString(std::string_view text) {
  if (!NeedsQuotes(text)) return std::string(text);
  std::string out = "\"";
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      // Control characters (a newline in an env value) written as escapes, so they read back.
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

// Byte and duration texts that ParseBytes/ParseDuration read back to the same value.
std::string FormatBytesExact(std::uint64_t bytes) {
  if (bytes != 0) {
    if (bytes % kGiB == 0) return fmt::format("{}Gi", bytes / kGiB);
    if (bytes % kMiB == 0) return fmt::format("{}Mi", bytes / kMiB);
    if (bytes % 1'000'000 == 0) return fmt::format("{}M", bytes / 1'000'000);
    const std::string decimal = fmt::format("{}M", static_cast<double>(bytes) / 1e6);
    if (auto parsed = ParseBytes(decimal); parsed.ok() && *parsed == bytes) return decimal;
  }
  return fmt::format("{}", bytes);
}

std::string FormatDurationExact(Duration duration) {
  const auto ns = duration.count();
  if (ns != 0 && ns % 1'000'000'000 == 0) return fmt::format("{}s", ns / 1'000'000'000);
  const std::string ms = fmt::format("{}ms", static_cast<double>(ns) / 1e6);
  if (auto parsed = ParseDuration(ms); parsed.ok() && *parsed == duration) return ms;
  return fmt::format("{}ns", ns);
}

}  // namespace

const FunctionSpec* Catalog::FindFunction(std::string_view name) const {
  if (function_index_.size() == functions.size()) {
    const auto it = function_index_.find(std::string(name));
    if (it != function_index_.end() && it->second < functions.size() &&
        functions[it->second].name == name) {
      return &functions[it->second];
    }
    if (it == function_index_.end()) return nullptr;
  }
  // `functions` was changed directly: fall back to a scan.
  for (const auto& spec : functions) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const GpuType* Catalog::FindGpuType(std::string_view name) const {
  return FindType(gpu_types, name);
}

Status Catalog::AddFunction(FunctionSpec spec) {
  if (FindFunction(spec.name) != nullptr) {
    return AlreadyExists(fmt::format("function '{}' is already in the catalog", spec.name));
  }
  if (function_index_.size() != functions.size()) {
    function_index_.clear();
    for (std::size_t i = 0; i < functions.size(); ++i) function_index_[functions[i].name] = i;
  }
  function_index_[spec.name] = functions.size();
  functions.push_back(std::move(spec));
  return Status::Ok();
}

const std::vector<GpuType>& BuiltinGpuTypes() {
  static const std::vector<GpuType> types = [] {
    auto parsed = ParseWithBase(BuiltinGpuTypesYaml(), "data/gpu-types.yaml (embedded)", {}, {});
    if (!parsed.ok()) {
      // A broken embedded table is a build defect; the unit tests catch it.
      spdlog::error("{}", parsed.status().ToString());
      return std::vector<GpuType>{};
    }
    return std::move(parsed->gpu_types);
  }();
  return types;
}

Result<Catalog> ParseCatalog(std::string_view yaml_text, std::string_view source,
                             const std::filesystem::path& base_dir) {
  return ParseWithBase(yaml_text, source, BuiltinGpuTypes(), base_dir);
}

Result<FunctionSpec> ParseFunctionEntry(std::string_view yaml_text, std::string_view source,
                                        std::string_view default_tenant,
                                        const std::filesystem::path& base_dir) {
  return ParseEntryText(yaml_text, source, default_tenant, base_dir);
}

Result<Catalog> LoadCatalog(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return InvalidArgument(fmt::format("{}: is a directory, not a catalog file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("{}: cannot open the catalog file", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(fmt::format("{}: read failed", path));
  const std::filesystem::path folder = std::filesystem::absolute(path, error).parent_path();
  if (error) {
    return IoError(fmt::format("{}: cannot tell the catalog's folder: {}", path, error.message()));
  }
  return ParseCatalog(text.str(), path, folder);
}

std::string FunctionSpecToYaml(const FunctionSpec& spec) {
  std::string out;
  out += fmt::format("name: {}\n", YamlString(spec.name));
  out += fmt::format("tenant: {}\n", YamlString(spec.tenant));
  if (!spec.model.empty() && spec.model != spec.name) {
    out += fmt::format("model: {}\n", YamlString(spec.model));
  }
  out += fmt::format("model_size: {}\n", FormatBytesExact(spec.model_bytes));
  out += fmt::format("gpu_memory: {}\n", FormatBytesExact(spec.gpu_memory_bytes));
  const bool scalar_latency = spec.exec_latency.size() == 1 &&
                              spec.exec_latency.begin()->first == spec.reference_gpu &&
                              spec.exec_latency.begin()->second.by_batch.size() == 1 &&
                              spec.exec_latency.begin()->second.by_batch.contains(1);
  if (scalar_latency) {
    out += fmt::format("exec_latency: {}\n",
                       FormatDurationExact(spec.exec_latency.begin()->second.by_batch.at(1)));
  } else {
    out += "exec_latency:\n";
    for (const auto& [gpu, table] : spec.exec_latency) {
      if (table.by_batch.size() == 1 && table.by_batch.contains(1)) {
        out +=
            fmt::format("  {}: {}\n", YamlString(gpu), FormatDurationExact(table.by_batch.at(1)));
        continue;
      }
      out += fmt::format("  {}:\n", YamlString(gpu));
      for (const auto& [batch, latency] : table.by_batch) {
        out += fmt::format("    {}: {}\n", batch, FormatDurationExact(latency));
      }
    }
  }
  if (spec.reference_gpu != FunctionSpec{}.reference_gpu) {
    out += fmt::format("reference_gpu: {}\n", YamlString(spec.reference_gpu));
  }
  if (spec.slo) out += fmt::format("slo: {}\n", FormatDurationExact(*spec.slo));
  if (spec.slo_factor) out += fmt::format("slo_factor: {}\n", *spec.slo_factor);
  if (spec.max_batch != 1) out += fmt::format("max_batch: {}\n", spec.max_batch);
  if (spec.batch_memory_bytes != 0) {
    out += fmt::format("batch_memory: {}\n", FormatBytesExact(spec.batch_memory_bytes));
  }
  if (spec.min_instances != 0) out += fmt::format("min_instances: {}\n", spec.min_instances);
  if (spec.max_instances != 0) out += fmt::format("max_instances: {}\n", spec.max_instances);
  if (!spec.command.empty()) {
    std::vector<std::string> items;
    for (const auto& argument : spec.command) items.push_back(YamlString(argument));
    out += fmt::format("command: [{}]\n", fmt::join(items, ", "));
  }
  if (!spec.runtime.empty()) out += fmt::format("runtime: {}\n", YamlString(spec.runtime));
  if (spec.threads != 1) out += fmt::format("threads: {}\n", spec.threads);
  if (spec.switch_mechanism != SwitchMechanism::kShim) {
    out += fmt::format("switch: {}\n", SwitchMechanismName(spec.switch_mechanism));
  }
  if (!spec.env.empty()) {
    out += "env:\n";
    for (const auto& [name, value] : spec.env) {
      out += fmt::format("  {}: {}\n", YamlString(name), YamlString(value));
    }
  }
  if (!spec.working_dir.empty()) {
    out += fmt::format("working_dir: {}\n", YamlString(spec.working_dir));
  }
  if (!spec.model_files.empty()) {
    out += "model_files:\n";
    for (const auto& file : spec.model_files) out += fmt::format("  - {}\n", YamlString(file));
  }
  if (spec.timeout) out += fmt::format("timeout: {}\n", FormatDurationExact(*spec.timeout));
  if (spec.host_memory_bytes) {
    out += fmt::format("host_memory: {}\n", FormatBytesExact(*spec.host_memory_bytes));
  }
  for (const auto& [field, tensors] :
       {std::pair<const char*, const std::vector<TensorSpec>&>{"inputs", spec.inputs},
        {"outputs", spec.outputs}}) {
    if (tensors.empty()) continue;
    out += fmt::format("{}:\n", field);
    for (const TensorSpec& tensor : tensors) {
      out += fmt::format("  - {{name: {}, datatype: {}, shape: [{}]}}\n", YamlString(tensor.name),
                         DataTypeName(tensor.datatype), fmt::join(tensor.shape, ", "));
    }
  }
  return out;
}

std::string CatalogToYaml(const Catalog& catalog) {
  if (catalog.functions.empty()) return "functions: []\n";
  std::string out = "functions:\n";
  for (const auto& spec : catalog.functions) {
    // Each entry's lines, indented as one item of the list.
    const std::string entry = FunctionSpecToYaml(spec);
    std::string_view rest = entry;
    bool first = true;
    while (!rest.empty()) {
      const std::size_t end = rest.find('\n');
      const std::string_view line = rest.substr(0, end);
      out += first ? "  - " : "    ";
      out += line;
      out += '\n';
      first = false;
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    }
  }
  return out;
}

}  // namespace gshare
