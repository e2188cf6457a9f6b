// The shipped model catalog (data/models.yaml) and how it is derived from public measurements.
//
// DeriveModelCatalog turns a timm inference benchmark table (throughput, parameters, activations
// of ~1,600 vision models on one GPU) and the ResNet-50 latency tables in a profiles folder into
// catalog functions with a batch-1 latency on the reference GPU (a100-40gb):
//
//   model_size   = param_count (millions) x 4 bytes            (FP32 weights)
//   gpu_memory   = model_size + activations x 4 bytes + 256 MiB workspace, rounded up to 128 MiB
//   exec_latency = L_ref x (T_ref / T_model) ^ alpha
//
// where T is the model's timm throughput (samples/s), T_ref is ResNet-50's, L_ref is ResNet-50's
// measured A100 batch-1 latency (NVIDIA's Triton table), and alpha is the exponent at which the
// same table's A100 latency grows with work: ln(L(b_max) / L(1)) / ln(b_max). docs/catalog.md
// explains the choices. Everything is deterministic: the same inputs give the same file.
#pragma once

#include <string>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/model/catalog.h"

namespace gshare {

struct DeriveOptions {
  std::string timm_benchmark_path;  // timm results/benchmark-infer-*.csv
  std::string profiles_dir;         // holds nvidia_dle_resnet50_triton_offline.csv (and, if
                                    // present, clockwork_resnet50_v2_profile.csv for a check)
  int count = 100;                  // how many models, spread evenly over log(param_count)
};

struct DerivedCatalog {
  Catalog catalog;                  // functions sorted by model size, then name
  std::size_t candidates = 0;       // usable rows in the timm table, after de-duplication
  double reference_latency_ms = 0;  // L_ref
  double reference_throughput = 0;  // T_ref (samples/s)
  double exponent = 0;              // alpha
  double clockwork_weights_mb = 0;  // ResNet-50 weights in the Clockwork profile; 0 if absent
  std::string header;               // YAML comment lines: inputs, rules, the figures above
};

// The model workspace and rounding of the gpu_memory rule.
inline constexpr std::uint64_t kModelWorkspaceBytes = 256 * kMiB;
inline constexpr std::uint64_t kGpuMemoryGranule = 128 * kMiB;

// Errors name the file and line (missing columns, non-numeric fields, no ResNet-50 row, no A100
// rows in the profile table), or count < 1.
Result<DerivedCatalog> DeriveModelCatalog(const DeriveOptions& options);

// The file data/models.yaml: `derived.header`, then CatalogToYaml of its functions.
std::string DerivedCatalogToYaml(const DerivedCatalog& derived);

// The text of data/models.yaml, embedded at build time.
std::string_view BuiltinModelCatalogYaml();
// Parses the embedded data/models.yaml. The unit tests make sure it parses.
Result<Catalog> BuiltinModelCatalog();

}  // namespace gshare
