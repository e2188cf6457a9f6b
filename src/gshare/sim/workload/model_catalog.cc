#include "gshare/sim/workload/model_catalog.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "gshare/sim/workload/csv.h"

namespace gshare {
namespace {

constexpr std::string_view kNvidiaTable = "nvidia_dle_resnet50_triton_offline.csv";
constexpr std::string_view kClockworkTable = "clockwork_resnet50_v2_profile.csv";
constexpr std::string_view kReferenceModel = "resnet50";
constexpr std::string_view kReferenceGpuRow = "A100-80GB";  // same GA100 compute as a100-40gb
constexpr int kStandardImageSize = 224;

struct TimmRow {
  std::string name;
  int image_size = 0;
  double throughput = 0;     // samples per second
  double params_m = 0;       // millions of parameters
  double activations_m = 0;  // millions of activations per sample
};

Result<int> Column(const CsvFile& csv, const std::vector<std::string_view>& header,
                   std::string_view name) {
  const int column = FindColumn(header, name);
  if (column < 0) return csv.Error(fmt::format("bad header: no '{}' column", name));
  return column;
}

Result<double> Number(const CsvFile& csv, const std::vector<std::string_view>& row, int column,
                      std::string_view name) {
  if (static_cast<std::size_t>(column) >= row.size()) {
    return csv.Error(fmt::format("missing column '{}'", name));
  }
  double value = 0;
  if (!ParseDouble(row[static_cast<std::size_t>(column)], value)) {
    return csv.Error(fmt::format("column '{}': '{}' is not a number", name,
                                 row[static_cast<std::size_t>(column)]));
  }
  return value;
}

// Reads the timm table; one row per model name (the image size closest to 224, then the smaller).
Result<std::vector<TimmRow>> ReadTimm(const std::string& path) {
  GSHARE_ASSIGN_OR_RETURN(CsvFile csv, CsvFile::Open(path));
  std::vector<std::string_view> row;
  if (!csv.NextRow(row)) return InvalidArgument(fmt::format("{}: the file is empty", path));
  GSHARE_ASSIGN_OR_RETURN(const int model, Column(csv, row, "model"));
  GSHARE_ASSIGN_OR_RETURN(const int size, Column(csv, row, "infer_img_size"));
  GSHARE_ASSIGN_OR_RETURN(const int throughput, Column(csv, row, "infer_samples_per_sec"));
  GSHARE_ASSIGN_OR_RETURN(const int params, Column(csv, row, "param_count"));
  GSHARE_ASSIGN_OR_RETURN(const int activations, Column(csv, row, "infer_macts"));
  std::map<std::string, TimmRow, std::less<>> by_name;
  while (csv.NextRow(row)) {
    if (static_cast<std::size_t>(model) >= row.size()) return csv.Error("missing column 'model'");
    TimmRow entry;
    entry.name = std::string(row[static_cast<std::size_t>(model)]);
    if (entry.name.rfind("test_", 0) == 0) continue;  // timm's tiny test networks
    GSHARE_ASSIGN_OR_RETURN(const double image, Number(csv, row, size, "infer_img_size"));
    entry.image_size = static_cast<int>(image);
    GSHARE_ASSIGN_OR_RETURN(entry.throughput,
                            Number(csv, row, throughput, "infer_samples_per_sec"));
    GSHARE_ASSIGN_OR_RETURN(entry.params_m, Number(csv, row, params, "param_count"));
    GSHARE_ASSIGN_OR_RETURN(entry.activations_m, Number(csv, row, activations, "infer_macts"));
    if (entry.throughput <= 0 || entry.params_m <= 0 || entry.activations_m < 0) {
      return csv.Error("throughput and param_count must be positive");
    }
    auto [it, inserted] = by_name.emplace(entry.name, entry);
    if (!inserted) {
      const int old_distance = std::abs(it->second.image_size - kStandardImageSize);
      const int new_distance = std::abs(entry.image_size - kStandardImageSize);
      if (new_distance < old_distance ||
          (new_distance == old_distance && entry.image_size < it->second.image_size)) {
        it->second = entry;
      }
    }
  }
  std::vector<TimmRow> rows;
  rows.reserve(by_name.size());
  for (auto& [name, entry] : by_name) rows.push_back(std::move(entry));
  if (rows.empty()) return InvalidArgument(fmt::format("{}: no model rows", path));
  return rows;
}

struct LatencyFit {
  double batch1_ms = 0;
  double exponent = 0;
};

Result<LatencyFit> ReadNvidiaTable(const std::string& path) {
  GSHARE_ASSIGN_OR_RETURN(CsvFile csv, CsvFile::Open(path));
  std::vector<std::string_view> row;
  if (!csv.NextRow(row)) return InvalidArgument(fmt::format("{}: the file is empty", path));
  GSHARE_ASSIGN_OR_RETURN(const int gpu, Column(csv, row, "gpu"));
  GSHARE_ASSIGN_OR_RETURN(const int batch, Column(csv, row, "batch_size"));
  GSHARE_ASSIGN_OR_RETURN(const int average, Column(csv, row, "avg_ms"));
  std::map<int, double> by_batch;
  while (csv.NextRow(row)) {
    if (static_cast<std::size_t>(gpu) >= row.size()) return csv.Error("missing column 'gpu'");
    if (row[static_cast<std::size_t>(gpu)] != kReferenceGpuRow) continue;
    GSHARE_ASSIGN_OR_RETURN(const double b, Number(csv, row, batch, "batch_size"));
    GSHARE_ASSIGN_OR_RETURN(const double ms, Number(csv, row, average, "avg_ms"));
    if (b < 1 || ms <= 0) return csv.Error("batch_size and avg_ms must be positive");
    by_batch[static_cast<int>(b)] = ms;
  }
  if (!by_batch.contains(1) || by_batch.size() < 2) {
    return InvalidArgument(
        fmt::format("{}: needs {} rows for batch 1 and a larger batch", path, kReferenceGpuRow));
  }
  const auto& [largest, largest_ms] = *by_batch.rbegin();
  LatencyFit fit;
  fit.batch1_ms = by_batch.at(1);
  fit.exponent = std::log(largest_ms / fit.batch1_ms) / std::log(static_cast<double>(largest));
  return fit;
}

// ResNet-50's weight size in the Clockwork profile (MB), or 0 when the file is absent.
Result<double> ReadClockworkWeights(const std::string& path) {
  if (!std::filesystem::exists(path)) return 0.0;
  GSHARE_ASSIGN_OR_RETURN(CsvFile csv, CsvFile::Open(path));
  std::vector<std::string_view> row;
  if (!csv.NextRow(row)) return InvalidArgument(fmt::format("{}: the file is empty", path));
  GSHARE_ASSIGN_OR_RETURN(const int phase, Column(csv, row, "phase"));
  GSHARE_ASSIGN_OR_RETURN(const int weights, Column(csv, row, "weights_mb"));
  while (csv.NextRow(row)) {
    if (static_cast<std::size_t>(phase) < row.size() &&
        row[static_cast<std::size_t>(phase)] == "load_weights_to_gpu") {
      return Number(csv, row, weights, "weights_mb");
    }
  }
  return 0.0;
}

// Picks `count` rows spread evenly over log(param_count), always with the reference model.
std::vector<const TimmRow*> Select(const std::vector<TimmRow>& rows, int count,
                                   const TimmRow& reference) {
  std::vector<const TimmRow*> sorted;
  for (const auto& row : rows) sorted.push_back(&row);
  std::sort(sorted.begin(), sorted.end(), [](const TimmRow* a, const TimmRow* b) {
    return a->params_m != b->params_m ? a->params_m < b->params_m : a->name < b->name;
  });
  std::vector<bool> taken(sorted.size(), false);
  std::vector<const TimmRow*> chosen{&reference};
  for (std::size_t i = 0; i < sorted.size(); ++i) taken[i] = sorted[i] == &reference;
  const double lo = std::log(sorted.front()->params_m);
  const double hi = std::log(sorted.back()->params_m);
  const int targets = std::min<int>(count, static_cast<int>(sorted.size())) - 1;
  for (int k = 0; k < targets; ++k) {
    const double target = targets == 1 ? lo : lo + (hi - lo) * k / (targets - 1);
    std::size_t best = sorted.size();
    double best_distance = 0;
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      if (taken[i]) continue;
      const double distance = std::abs(std::log(sorted[i]->params_m) - target);
      if (best == sorted.size() || distance < best_distance) {
        best = i;
        best_distance = distance;
      }
    }
    if (best == sorted.size()) break;
    taken[best] = true;
    chosen.push_back(sorted[best]);
  }
  return chosen;
}

std::uint64_t RoundUp(std::uint64_t value, std::uint64_t granule) {
  return (value + granule - 1) / granule * granule;
}

}  // namespace

Result<DerivedCatalog> DeriveModelCatalog(const DeriveOptions& options) {
  if (options.count < 1) return InvalidArgument("--count must be at least 1");
  GSHARE_ASSIGN_OR_RETURN(const std::vector<TimmRow> rows, ReadTimm(options.timm_benchmark_path));
  const std::filesystem::path dir(options.profiles_dir);
  GSHARE_ASSIGN_OR_RETURN(const LatencyFit fit, ReadNvidiaTable((dir / kNvidiaTable).string()));
  GSHARE_ASSIGN_OR_RETURN(const double clockwork_mb,
                          ReadClockworkWeights((dir / kClockworkTable).string()));
  const auto reference = std::find_if(rows.begin(), rows.end(),
                                      [](const TimmRow& r) { return r.name == kReferenceModel; });
  if (reference == rows.end()) {
    return InvalidArgument(fmt::format("{}: no '{}' row to anchor latencies on",
                                       options.timm_benchmark_path, kReferenceModel));
  }
  DerivedCatalog derived;
  derived.candidates = rows.size();
  derived.reference_latency_ms = fit.batch1_ms;
  derived.reference_throughput = reference->throughput;
  derived.exponent = fit.exponent;
  derived.clockwork_weights_mb = clockwork_mb;

  std::vector<FunctionSpec> specs;
  for (const TimmRow* row : Select(rows, options.count, *reference)) {
    FunctionSpec spec;
    spec.name = row->name;
    spec.tenant = "public";
    spec.model = row->name;
    spec.model_bytes = static_cast<std::uint64_t>(std::llround(row->params_m * 1e6)) * 4;
    const auto activation_bytes =
        static_cast<std::uint64_t>(std::llround(row->activations_m * 1e6)) * 4;
    spec.gpu_memory_bytes =
        RoundUp(spec.model_bytes + activation_bytes + kModelWorkspaceBytes, kGpuMemoryGranule);
    const double ms =
        fit.batch1_ms * std::pow(reference->throughput / row->throughput, fit.exponent);
    // Whole microseconds: the profile is not more precise than that.
    spec.exec_latency[spec.reference_gpu].by_batch[1] =
        std::chrono::microseconds(std::max<std::int64_t>(1, std::llround(ms * 1000)));
    specs.push_back(std::move(spec));
  }
  std::sort(specs.begin(), specs.end(), [](const FunctionSpec& a, const FunctionSpec& b) {
    return a.model_bytes != b.model_bytes ? a.model_bytes < b.model_bytes : a.name < b.name;
  });
  for (auto& spec : specs) GSHARE_RETURN_IF_ERROR(derived.catalog.AddFunction(std::move(spec)));
  derived.catalog.gpu_types = BuiltinGpuTypes();

  const std::string timm_name =
      std::filesystem::path(options.timm_benchmark_path).filename().string();
  derived.header = fmt::format(
      "# Model profiles derived from public measurements; regenerate, do not edit by hand:\n"
      "#   gshare catalog derive --timm-benchmark <timm>/{} \\\n"
      "#     --profiles-dir <model-profiles> --count {} --out data/models.yaml\n"
      "# (docs/catalog.md names the data folders.) {} functions chosen from {} timm models,\n"
      "# spread evenly over log(param_count), with resnet50 always included.\n"
      "#   model_size   = param_count x 4 bytes (FP32)\n"
      "#   gpu_memory   = model_size + infer_macts x 4 bytes + {} MiB workspace, rounded up to {} "
      "MiB\n"
      "#   exec_latency = {} ms x ({} / infer_samples_per_sec) ^ {:.4f}   (batch 1, a100-40gb)\n"
      "# {} ms: ResNet-50 batch-1 avg_ms on the {} ({}); {:.2f} samples/s: timm resnet50;\n"
      "# exponent {:.4f} = ln(avg_ms(batch max) / avg_ms(batch 1)) / ln(batch max), same table.\n",
      timm_name, options.count, derived.catalog.functions.size(), rows.size(),
      kModelWorkspaceBytes / kMiB, kGpuMemoryGranule / kMiB, fit.batch1_ms, reference->throughput,
      fit.exponent, fit.batch1_ms, kReferenceGpuRow, kNvidiaTable, reference->throughput,
      fit.exponent);
  if (clockwork_mb > 0) {
    derived.header += fmt::format(
        "# Check: resnet50 model_size {:.1f} MB; Clockwork's ResNet-50 weights {:.1f} MB.\n",
        static_cast<double>(derived.catalog.FindFunction(kReferenceModel)->model_bytes) / 1e6,
        clockwork_mb);
  }
  return derived;
}

std::string DerivedCatalogToYaml(const DerivedCatalog& derived) {
  return derived.header + CatalogToYaml(derived.catalog);
}

Result<Catalog> BuiltinModelCatalog() {
  return ParseCatalog(BuiltinModelCatalogYaml(), "data/models.yaml (embedded)");
}

}  // namespace gshare
