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

std::string Padded(std::string_view prefix, int index, int count) {
  const int width = static_cast<int>(std::to_string(std::max(1, count - 1)).size());
  return fmt::format("{}{:0{}}", prefix, index, width);
}

}  // namespace

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
  const double duration = ToSeconds(options.duration);

  GeneratedWorkload out;
  out.catalog.gpu_types = profiles->gpu_types;
  Random master(options.seed);
  struct Stream {
    Random random;
    double rate;
  };
  std::vector<Stream> streams;
  streams.reserve(static_cast<std::size_t>(options.functions));
  for (int f = 0; f < options.functions; ++f) {
    Random random = master.Fork();
    const double u = random.Uniform();
    int size_class = u < kFractionUnder1GB ? 0 : (u < kFractionUnder4GB ? 1 : 2);
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
    GSHARE_RETURN_IF_ERROR(out.catalog.AddFunction(std::move(spec)));
    const double rate = DrawRatePerSecond(random);
    out.rate_per_second.push_back(rate);
    streams.push_back(Stream{random.Fork(), rate});
  }
  const double amplitude = options.diurnal_amplitude;
  const double start = options.start_hour * 3600;
  if (options.target_invocations > 0) {
    // Expected invocations: sum of rates x the integral of the diurnal factor over the window.
    const double omega = 2 * std::numbers::pi / kSecondsPerDay;
    const double phase = start - kSecondsPerDay / 2;
    const double window =
        duration +
        amplitude / omega * (std::sin(omega * (phase + duration)) - std::sin(omega * phase));
    double rate_sum = 0;
    for (const double rate : out.rate_per_second) rate_sum += rate;
    out.rate_scale = static_cast<double>(options.target_invocations) / (rate_sum * window);
  }

  std::vector<Invocation>& invocations = out.trace.invocations;
  for (int f = 0; f < options.functions; ++f) {
    Stream& stream = streams[static_cast<std::size_t>(f)];
    // Candidates at the peak rate, kept with probability factor(t) / peak (thinning).
    const double peak_rate = stream.rate * out.rate_scale * (1 + amplitude);
    const HyperExponential gaps(peak_rate, options.burst_cv);
    for (double t = gaps.DrawResidual(stream.random); t < duration; t += gaps.Draw(stream.random)) {
      const double clock = start + t;
      const double factor = 1 + amplitude * std::cos(2 * std::numbers::pi *
                                                     (clock - kSecondsPerDay / 2) / kSecondsPerDay);
      if (stream.random.Uniform() * (1 + amplitude) < factor) {
        invocations.push_back(Invocation{static_cast<std::size_t>(f), t, 0});
      }
    }
    if (options.progress && ((f + 1) % 256 == 0 || f + 1 == options.functions)) {
      options.progress(f + 1, options.functions);
    }
  }
  if (invocations.empty()) {
    return InvalidArgument(
        fmt::format("no function was invoked in {} (try more functions or a longer duration)",
                    FormatDuration(options.duration)));
  }
  std::sort(invocations.begin(), invocations.end(), [](const Invocation& a, const Invocation& b) {
    return a.arrival_seconds != b.arrival_seconds ? a.arrival_seconds < b.arrival_seconds
                                                  : a.function < b.function;
  });
  // Seconds from the first arrival, in whole microseconds: what invocations.csv holds exactly.
  const double first = invocations.front().arrival_seconds;
  for (auto& invocation : invocations) {
    invocation.arrival_seconds = std::round((invocation.arrival_seconds - first) * 1e6) / 1e6;
  }
  out.trace.path = "generated";
  out.trace.format = std::string(TraceFormatName(TraceFormat::kInvocations));
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
  const std::string path = (base / "invocations.csv").string();
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
