// Catalog: the functions and GPU types a run knows, loaded from YAML.
//
// Schema (more fields are allowed and ignored):
//   gpu_types:            # optional; the embedded table (data/gpu-types.yaml) is the default
//     - name: a100-40gb
//       memory: 40Gi
//       h2d_bandwidth: 24G          # bytes per second
//       restore_overhead: 1ms
//       price_per_hour: 2.74        # USD
//       price_source: "..."
//       relative_latency: 1.0
//       batch_scaling: [1.0, 1.03, 1.30, 1.83, 2.72]
//   functions:
//     - name: resnet50              # unique
//       tenant: acme
//       model: resnet50             # optional
//       model_size: 98Mi
//       gpu_memory: 300Mi           # >= model_size
//       exec_latency: 3.3ms         # batch 1 on reference_gpu; or a map by GPU type, whose values
//                                   # are a latency or a map batch -> latency
//       reference_gpu: a100-40gb    # optional
//       slo: 50ms                   # optional
//       max_batch: 1                # optional
//       batch_memory: 64Mi          # optional: extra GPU memory per request beyond the first in a
//                                   # batch (a slice grows to hold a batch)
//       min_instances: 0            # optional
//       max_instances: 0            # optional; 0: no bound
//       # How a live node runs it (all optional; without command or runtime the function is
//       # simulation-only and may give none of these):
//       command: [/usr/bin/fn, --port-file, x]   # argv; or
//       runtime: mlp                # a bundled example runtime (kBundledRuntimes)
//       env: {MODEL_NAME: resnet50} # POSIX names; GSHARE_* is reserved for the node
//       working_dir: fn             # absolute, or relative to the catalog file's folder
//       model_files: [weights.safetensors]  # resolved like working_dir
//       timeout: 30s                # per-request run timeout, at most 1h
//       host_memory: 1Gi            # an instance's memory.max where cgroups are delegated
// Loading is all-or-nothing: on any error nothing is returned, and the error names the file, the
// entry and the field.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/model/function_spec.h"
#include "gshare/model/gpu_type.h"

namespace gshare {

// The tenant of a function whose entry names none.
inline constexpr std::string_view kDefaultTenant = "default";

struct Catalog {
  std::vector<FunctionSpec> functions;
  std::vector<GpuType> gpu_types;

  const FunctionSpec* FindFunction(std::string_view name) const;
  const GpuType* FindGpuType(std::string_view name) const;
  // Adds a function; AlreadyExists when the name is taken.
  Status AddFunction(FunctionSpec spec);

 private:
  std::unordered_map<std::string, std::size_t> function_index_;
};

// The GPU types shipped with gshare (data/gpu-types.yaml, embedded at build time).
const std::vector<GpuType>& BuiltinGpuTypes();

// Parses catalog YAML text; `source` names it in errors. GPU types in the text replace built-in
// types of the same name and add new ones. Relative working_dir and model_files are resolved
// against `base_dir`; with an empty `base_dir` they are an error. Every string is checked for NUL
// bytes and length, every list and map for size (limits in function_spec.h).
Result<Catalog> ParseCatalog(std::string_view yaml_text, std::string_view source,
                             const std::filesystem::path& base_dir = {});
// Parses one function entry (a map in the schema above, the text of one item of `functions`)
// with the same checks as ParseCatalog, against the built-in GPU types. An entry without a
// `tenant` gets `default_tenant`. This is the validator of a function spec that arrives alone (the
// serve registry); an error names `source` and the field.
Result<FunctionSpec> ParseFunctionEntry(std::string_view yaml_text, std::string_view source,
                                        std::string_view default_tenant = kDefaultTenant,
                                        const std::filesystem::path& base_dir = {});
// Reads and parses a catalog file; relative paths in it are relative to its folder.
Result<Catalog> LoadCatalog(const std::string& path);

// Writes `catalog`'s functions as YAML in the schema above (GPU types are not written).
std::string CatalogToYaml(const Catalog& catalog);
// Writes one function as a YAML map (one entry of the schema above, tenant included);
// ParseFunctionEntry reads it back to an equal spec.
std::string FunctionSpecToYaml(const FunctionSpec& spec);

}  // namespace gshare
