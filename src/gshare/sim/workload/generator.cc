#include "gshare/sim/workload/generator.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "gshare/common/random.h"
#include "gshare/sim/workload/model_catalog.h"

namespace gshare {
namespace {

constexpr double kSecondsPerDay = 86400;

// Piecewise log-uniform rate distribution: log10(invocations per day) at each breakpoint, and
// the cumulative probability there. 24/day = 1/hour, 1440/day = 1/minute; the ends span the
// 8 orders of magnitude of the Azure Functions 2019 trace.
constexpr double kLogRateBreaks[] = {0.0, 1.380211241711606, 3.158362492095381, 8.0};
constexpr double kRateCdf[] = {0.0, kFractionAtMostHourly, kFractionAtMostMinutely, 1.0};

double DrawRatePerSecond(Random& random) {
  const double u = random.Uniform();
  std::size_t segment = 0;
  while (segment + 2 < std::size(kRateCdf) && u >= kRateCdf[segment + 1]) ++segment;
  const double within = (u - kRateCdf[segment]) / (kRateCdf[segment + 1] - kRateCdf[segment]);
  const double log_rate =
      kLogRateBreaks[segment] + within * (kLogRateBreaks[segment + 1] - kLogRateBreaks[segment]);
  return std::pow(10.0, log_rate) / kSecondsPerDay;
}

// The memory regime's mean rates: log-uniform between 1 per hour and 4 per minute.
double DrawRareRatePerSecond(Random& random) {
  return std::exp(random.Uniform(std::log(1.0 / 3600), std::log(4.0 / 60)));
}

int SizeClass(std::uint64_t model_bytes) {
  if (model_bytes < kSmallModelLimitBytes) return 0;
  if (model_bytes < kMediumModelLimitBytes) return 1;
  return 2;
}

// Two-phase hyper-exponential with balanced means: mean 1/rate, coefficient of variation cv.
struct HyperExponential {
  double p = 1;  // probability of phase 1
  double rate1 = 1;
  double rate2 = 1;

  HyperExponential(double rate, double cv) {
    const double c2 = cv * cv;
    p = 0.5 * (1 + std::sqrt((c2 - 1) / (c2 + 1)));
    rate1 = 2 * p * rate;
    rate2 = 2 * (1 - p) * rate;
  }
  double Draw(Random& random) const {
    return random.Bernoulli(p) ? random.Exponential(rate1) : random.Exponential(rate2);
  }
  // The forward recurrence time of the stationary process (so a trace does not start with every
  // function at a renewal): phase i with weight p_i / rate_i, then that phase's exponential.
  double DrawResidual(Random& random) const {
    const double w1 = p / rate1;
    const double w2 = (1 - p) / rate2;
    return random.Bernoulli(w1 / (w1 + w2)) ? random.Exponential(rate1) : random.Exponential(rate2);
  }
};

Status CheckOptions(const GeneratorOptions& options) {
  if (options.functions < 1) return InvalidArgument("--functions must be at least 1");
  if (options.duration <= Duration::zero()) return InvalidArgument("--duration must be positive");
  if (options.tenants < 0) return InvalidArgument("--tenants must not be negative");
  if (!(options.burst_cv >= 1)) return InvalidArgument("--burst-cv must be at least 1");
  if (!(options.diurnal_amplitude >= 0 && options.diurnal_amplitude < 1)) {
    return InvalidArgument("--diurnal-amplitude must be in [0, 1)");
  }
  if (!(options.start_hour >= 0 && options.start_hour < 24)) {
    return InvalidArgument("--start-hour must be in [0, 24)");
  }
  return Status::Ok();
}

// Seconds of the window [start, start + duration) weighted by the diurnal factor: the expected
// invocations of a function of mean rate r in the window are r times this.
double DiurnalWindowSeconds(const GeneratorOptions& options) {
  const double amplitude = options.diurnal_amplitude;
  const double duration = ToSeconds(options.duration);
  const double omega = 2 * std::numbers::pi / kSecondsPerDay;
  const double phase = options.start_hour * 3600 - kSecondsPerDay / 2;
  return duration +
         amplitude / omega * (std::sin(omega * (phase + duration)) - std::sin(omega * phase));
}

// Appends `function`'s arrivals in the window: a hyper-exponential renewal process at the peak
// rate, thinned by the diurnal factor.
void AppendArrivals(std::size_t function, double mean_rate, const GeneratorOptions& options,
                    Random& random, std::vector<Invocation>& invocations) {
  const double amplitude = options.diurnal_amplitude;
  const double start = options.start_hour * 3600;
  const double duration = ToSeconds(options.duration);
  // Candidates at the peak rate, kept with probability factor(t) / peak (thinning).
  const double peak_rate = mean_rate * (1 + amplitude);
  const HyperExponential gaps(peak_rate, options.burst_cv);
  for (double t = gaps.DrawResidual(random); t < duration; t += gaps.Draw(random)) {
    const double clock = start + t;
    const double factor = 1 + amplitude * std::cos(2 * std::numbers::pi *
                                                   (clock - kSecondsPerDay / 2) / kSecondsPerDay);
    if (random.Uniform() * (1 + amplitude) < factor) {
      invocations.push_back(Invocation{function, t, 0});
    }
  }
}

// Sorts the arrivals and makes them seconds from the first, in whole microseconds: what
// invocations.csv holds exactly.
Status FinishTrace(const GeneratorOptions& options, RawTrace& trace) {
  std::vector<Invocation>& invocations = trace.invocations;
  if (invocations.empty()) {
    return InvalidArgument(
        fmt::format("no function was invoked in {} (try more functions, a higher rate or a "
                    "longer duration)",
                    FormatDuration(options.duration)));
  }
  std::sort(invocations.begin(), invocations.end(), [](const Invocation& a, const Invocation& b) {
    return a.arrival_seconds != b.arrival_seconds ? a.arrival_seconds < b.arrival_seconds
                                                  : a.function < b.function;
  });
  const double first = invocations.front().arrival_seconds;
  for (auto& invocation : invocations) {
    invocation.arrival_seconds = std::round((invocation.arrival_seconds - first) * 1e6) / 1e6;
  }
  trace.path = "generated";
  trace.format = std::string(TraceFormatName(TraceFormat::kInvocations));
  return Status::Ok();
}

// A function's batch-1 latency on its reference GPU type (else on the first type it lists).
Duration Batch1Latency(const FunctionSpec& spec) {
  auto it = spec.exec_latency.find(spec.reference_gpu);
  if (it == spec.exec_latency.end()) it = spec.exec_latency.begin();
  if (it == spec.exec_latency.end()) return Duration::zero();
  const auto batch1 = it->second.by_batch.find(1);
  return batch1 == it->second.by_batch.end() ? Duration::zero() : batch1->second;
}

// How `spec` batches (generator.h): max_batch, the latency curve on its reference GPU type and
// one request's batch memory, drawn from `random`.
void DrawBatching(Random& random, std::uint64_t gpu_memory_limit, FunctionSpec& spec) {
  static constexpr int kMaxBatches[3][4] = {{4, 8, 16, 32}, {2, 4, 8, 16}, {1, 2, 4, 8}};
  spec.max_batch = kMaxBatches[SizeClass(spec.model_bytes)][random.Below(4)];
  const double alpha = random.Uniform(0.45, 0.85);
  constexpr std::uint64_t kWorkspace = 256 * kMiB;
  const std::uint64_t fixed = spec.model_bytes + kWorkspace;
  const std::uint64_t activations =
      spec.gpu_memory_bytes > fixed ? spec.gpu_memory_bytes - fixed : 0;
  spec.batch_memory_bytes = std::max<std::uint64_t>(activations, 16 * kMiB);
  // A full batch needs at most four times the function's memory (or 4 GiB), and fits its
  // reference GPU: the profile's activations count every layer's at once, an upper bound.
  const std::uint64_t limit =
      std::min(std::max<std::uint64_t>(4 * spec.gpu_memory_bytes, 4 * kGiB), gpu_memory_limit);
  while (spec.max_batch > 1 &&
         spec.gpu_memory_bytes +
                 spec.batch_memory_bytes * static_cast<std::uint64_t>(spec.max_batch - 1) >
             limit) {
    spec.max_batch /= 2;
  }
  const Duration batch1 = Batch1Latency(spec);
  BatchLatency curve;
  for (int b = 1; b <= spec.max_batch; b *= 2) {
    curve.by_batch[b] = Duration(std::llround(static_cast<double>(batch1.count()) *
                                              std::pow(static_cast<double>(b), alpha)));
  }
  spec.exec_latency[spec.reference_gpu] = curve;
}

// A name invocations.csv can hold: the trace reader splits on commas and lines, and trims.
bool CsvSafeName(std::string_view name) {
  if (name.empty() || name.front() == ' ' || name.back() == ' ') return false;
  return std::none_of(name.begin(), name.end(), [](char c) {
    return c == ',' || c == '"' || c == '\n' || c == '\r' || c == '\t';
  });
}

std::string Padded(std::string_view prefix, int index, int count) {
  const int width = static_cast<int>(std::to_string(std::max(1, count - 1)).size());
  return fmt::format("{}{:0{}}", prefix, index, width);
}

}  // namespace

Result<WorkloadRegime> ParseWorkloadRegime(std::string_view text) {
  if (text == "compute") return WorkloadRegime::kCompute;
  if (text == "memory") return WorkloadRegime::kMemory;
  return InvalidArgument(fmt::format("unknown regime '{}' (known: compute, memory)", text));
}

std::string_view WorkloadRegimeName(WorkloadRegime regime) {
  return regime == WorkloadRegime::kMemory ? "memory" : "compute";
}

Result<GeneratedWorkload> GenerateWorkload(const GeneratorOptions& options) {
  GSHARE_RETURN_IF_ERROR(CheckOptions(options));
  Result<Catalog> profiles = options.profile_catalog_path.empty()
                                 ? BuiltinModelCatalog()
                                 : LoadCatalog(options.profile_catalog_path);
  if (!profiles.ok()) return profiles.status().WithContext("profile catalog");
  if (profiles->functions.empty()) return InvalidArgument("the profile catalog has no functions");
  std::vector<std::size_t> by_class[3];
  for (std::size_t i = 0; i < profiles->functions.size(); ++i) {
    by_class[SizeClass(profiles->functions[i].model_bytes)].push_back(i);
  }
  const int tenants = options.tenants > 0 ? options.tenants : std::max(1, options.functions / 10);

  GeneratedWorkload out;
  out.catalog.gpu_types = profiles->gpu_types;
  Random master(options.seed);
  // Batching draws from streams of their own: with it on or off, the rest is the same.
  Random batching_master(options.seed ^ 0x6261746368ull);
  const bool memory = options.regime == WorkloadRegime::kMemory;
  const double under_1gb = memory ? 0.2 : kFractionUnder1GB;
  const double under_4gb = memory ? 0.5 : kFractionUnder4GB;
  struct Stream {
    Random random;
    double rate;
  };
  std::vector<Stream> streams;
  streams.reserve(static_cast<std::size_t>(options.functions));
  for (int f = 0; f < options.functions; ++f) {
    Random random = master.Fork();
    Random batching = batching_master.Fork();
    const double u = random.Uniform();
    int size_class = u < under_1gb ? 0 : (u < under_4gb ? 1 : 2);
    // A class the catalog lacks: the nearest one it has (larger first, then smaller).
    for (const int step : {0, 1, -1, 2, -2}) {
      const int candidate = size_class + step;
      if (candidate >= 0 && candidate < 3 && !by_class[candidate].empty()) {
        size_class = candidate;
        break;
      }
    }
    const auto& pool = by_class[size_class];
    const FunctionSpec& profile = profiles->functions[pool[random.Below(pool.size())]];
    FunctionSpec spec = profile;
    spec.model = profile.model.empty() ? profile.name : profile.model;
    spec.name = Padded("fn-", f, options.functions);
    if (options.slo_factor > 0) {
      spec.slo.reset();
      spec.slo_factor = options.slo_factor;
    }
    spec.tenant = Padded(
        "tenant-", static_cast<int>(random.Below(static_cast<std::uint64_t>(tenants))), tenants);
    if (options.batching) {
      const GpuType* reference = profiles->FindGpuType(spec.reference_gpu);
      DrawBatching(batching, reference != nullptr ? reference->memory_bytes : UINT64_MAX, spec);
    }
    GSHARE_RETURN_IF_ERROR(out.catalog.AddFunction(std::move(spec)));
    const double rate = memory ? DrawRareRatePerSecond(random) : DrawRatePerSecond(random);
    out.rate_per_second.push_back(rate);
    streams.push_back(Stream{random.Fork(), rate});
  }
  if (options.target_invocations > 0) {
    // Expected invocations: sum of rates x the integral of the diurnal factor over the window.
    const double window = DiurnalWindowSeconds(options);
    double rate_sum = 0;
    for (const double rate : out.rate_per_second) rate_sum += rate;
    out.rate_scale = static_cast<double>(options.target_invocations) / (rate_sum * window);
  }

  for (int f = 0; f < options.functions; ++f) {
    Stream& stream = streams[static_cast<std::size_t>(f)];
    AppendArrivals(static_cast<std::size_t>(f), stream.rate * out.rate_scale, options,
                   stream.random, out.trace.invocations);
    if (options.progress && ((f + 1) % 256 == 0 || f + 1 == options.functions)) {
      options.progress(f + 1, options.functions);
    }
  }
  GSHARE_RETURN_IF_ERROR(FinishTrace(options, out.trace));
  return out;
}

Result<GeneratedWorkload> GenerateCatalogWorkload(const Catalog& catalog,
                                                  const GeneratorOptions& options) {
  GSHARE_RETURN_IF_ERROR(CheckOptions(options));
  if (options.tenants != 0 || !options.profile_catalog_path.empty() ||
      options.target_invocations != 0 || options.slo_factor != 0 ||
      options.regime != WorkloadRegime::kCompute) {
    return InvalidArgument(
        "a catalog's trace keeps its functions as they are: tenants, profiles, target "
        "invocations, SLO factor and regime do not apply");
  }
  if (!(std::isfinite(options.rate_per_second) && options.rate_per_second >= 0 &&
        options.rate_per_second <= kMaxCatalogRatePerSecond)) {
    return InvalidArgument(
        fmt::format("--rps must be positive and at most {:g}", kMaxCatalogRatePerSecond));
  }
  if (catalog.functions.empty()) return InvalidArgument("the catalog has no functions");
  for (const auto& spec : catalog.functions) {
    if (!CsvSafeName(spec.name)) {
      return InvalidArgument(fmt::format(
          "function '{}': invocations.csv cannot hold a name with a comma, quote, tab or line "
          "break, or one that starts or ends with a space",
          spec.name));
    }
  }
  const std::size_t count = catalog.functions.size();
  GeneratedWorkload out;
  out.catalog = catalog;
  // Popularity: each function draws an Azure rate as a generated function does, from its own
  // stream; shares follow those rates, with kCatalogEvenShare of the total spread evenly.
  Random master(options.seed);
  std::vector<Random> streams;
  std::vector<double> drawn;
  streams.reserve(count);
  for (std::size_t f = 0; f < count; ++f) {
    Random random = master.Fork();
    drawn.push_back(DrawRatePerSecond(random));
    streams.push_back(random.Fork());
  }
  double drawn_sum = 0;
  for (const double rate : drawn) drawn_sum += rate;
  std::vector<double> shares;
  for (const double rate : drawn) {
    shares.push_back(kCatalogEvenShare / static_cast<double>(count) +
                     (1 - kCatalogEvenShare) * rate / drawn_sum);
  }
  double total = options.rate_per_second;
  if (total == 0) {
    // Default: the rate at which batch-1 execution keeps one GPU busy kDefaultCatalogLoad of the
    // time, given the shares.
    double mean_exec_seconds = 0;
    for (std::size_t f = 0; f < count; ++f) {
      mean_exec_seconds += shares[f] * ToSeconds(Batch1Latency(catalog.functions[f]));
    }
    if (!(mean_exec_seconds > 0)) {
      return InvalidArgument(
          "the catalog gives no batch-1 latency to derive a rate from; give --rps");
    }
    total = std::min(kDefaultCatalogLoad / mean_exec_seconds, kMaxCatalogRatePerSecond);
  }
  const double expected = total * ToSeconds(options.duration);
  if (expected > kMaxCatalogInvocations) {
    return InvalidArgument(fmt::format(
        "{:.4g} requests per second for {} is about {:.3g} invocations; at most {:g} (lower "
        "--rps or --duration)",
        total, FormatDuration(options.duration), expected, kMaxCatalogInvocations));
  }
  // The diurnal factor's mean over the window, so the mean total rate in it is `total`.
  const double window_factor = DiurnalWindowSeconds(options) / ToSeconds(options.duration);
  for (std::size_t f = 0; f < count; ++f) {
    out.rate_per_second.push_back(shares[f] * total);
    AppendArrivals(f, shares[f] * total / window_factor, options, streams[f],
                   out.trace.invocations);
    if (options.progress) options.progress(static_cast<int>(f + 1), static_cast<int>(count));
  }
  GSHARE_RETURN_IF_ERROR(FinishTrace(options, out.trace));
  return out;
}

Status WriteGeneratedWorkload(const GeneratedWorkload& workload, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return IoError(fmt::format("{}: cannot create the folder: {}", dir, error.message()));
  const std::filesystem::path base(dir);
  {
    const std::string path = (base / "catalog.yaml").string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << "# Generated by `gshare workload`; docs/workloads.md describes the model.\n"
        << CatalogToYaml(workload.catalog);
    if (!out) return IoError(fmt::format("{}: write failed", path));
  }
  return WriteInvocations(workload, dir);
}

Status WriteInvocations(const GeneratedWorkload& workload, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return IoError(fmt::format("{}: cannot create the folder: {}", dir, error.message()));
  const std::string path = (std::filesystem::path(dir) / "invocations.csv").string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string buffer = "function,timestamp\n";
  buffer.reserve(1 << 20);
  for (const auto& invocation : workload.trace.invocations) {
    fmt::format_to(std::back_inserter(buffer), "{},{:.6f}\n",
                   workload.catalog.functions[invocation.function].name,
                   invocation.arrival_seconds);
    if (buffer.size() > (1 << 20) - 128) {
      out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      buffer.clear();
    }
  }
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  out.close();
  if (!out) return IoError(fmt::format("{}: write failed", path));
  return Status::Ok();
}

}  // namespace gshare
