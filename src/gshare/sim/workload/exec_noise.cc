#include "gshare/sim/workload/exec_noise.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "gshare/common/random.h"

namespace gshare {
namespace {

Result<double> Number(std::string_view text, std::string_view what, double lo, double hi) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value) || value < lo || value > hi) {
    return InvalidArgument(
        fmt::format("exec noise: {} '{}' must be a number in [{}, {}]", what, text, lo, hi));
  }
  return value;
}

}  // namespace

Result<ExecNoise> ParseExecNoise(std::string_view text) {
  ExecNoise noise;
  if (text == "none") return noise;
  const auto comma = text.find(',');
  const std::string_view head = text.substr(0, comma);
  constexpr std::string_view kLognormal = "lognormal:";
  if (head.substr(0, kLognormal.size()) != kLognormal) {
    return InvalidArgument(fmt::format(
        "exec noise '{}': expected none, lognormal:SIGMA or lognormal:SIGMA,straggler:P:X", text));
  }
  GSHARE_ASSIGN_OR_RETURN(noise.sigma, Number(head.substr(kLognormal.size()), "SIGMA", 0, 2));
  if (comma == std::string_view::npos) return noise;
  const std::string_view tail = text.substr(comma + 1);
  constexpr std::string_view kStraggler = "straggler:";
  const auto colon = tail.find(':', kStraggler.size());
  if (tail.substr(0, kStraggler.size()) != kStraggler || colon == std::string_view::npos) {
    return InvalidArgument(
        fmt::format("exec noise '{}': after the comma, expected straggler:P:X", text));
  }
  GSHARE_ASSIGN_OR_RETURN(
      noise.straggler_p,
      Number(tail.substr(kStraggler.size(), colon - kStraggler.size()), "P", 0, 1));
  GSHARE_ASSIGN_OR_RETURN(noise.straggler_x, Number(tail.substr(colon + 1), "X", 1, 1000));
  return noise;
}

std::string FormatExecNoise(const ExecNoise& noise) {
  if (noise.none()) return "none";
  std::string out = fmt::format("lognormal:{}", noise.sigma);
  if (noise.straggler_p > 0) {
    out += fmt::format(",straggler:{}:{}", noise.straggler_p, noise.straggler_x);
  }
  return out;
}

void DrawExecNoise(const ExecNoise& noise, std::uint64_t seed, Workload& workload) {
  workload.exec_factors.clear();
  if (noise.none()) return;
  // A stream of its own (the seed mixed with a constant), so that noise never shifts the draws
  // of anything else seeded the same.
  Random random(seed ^ 0x6e6f697365ull);
  workload.exec_factors.reserve(workload.requests.size());
  for (std::size_t i = 0; i < workload.requests.size(); ++i) {
    workload.exec_factors.push_back(static_cast<float>(DrawNoiseFactor(noise, random)));
  }
}

double DrawNoiseFactor(const ExecNoise& noise, Random& random) {
  const double mu = -0.5 * noise.sigma * noise.sigma;  // mean 1
  // Box-Muller from two uniforms in (0, 1].
  const double u1 = 1.0 - random.Uniform();
  const double u2 = random.Uniform();
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  double factor = std::exp(mu + noise.sigma * z);
  if (noise.straggler_p > 0 && random.Uniform() < noise.straggler_p) factor *= noise.straggler_x;
  return factor;
}

}  // namespace gshare
