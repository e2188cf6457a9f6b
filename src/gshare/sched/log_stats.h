// LogStats: the streaming mean and variance of the logarithm of a positive ratio (observed over
// predicted), for predictions from a high quantile rather than a mean with a flat margin.
//
// It starts from a prior (mean 0: the prediction is right; standard deviation kPriorSigma) that
// counts as kPriorWeight observations, and weighs each observation 1 / (n + kPriorWeight) until
// that reaches kFloorWeight, so it converges at once where the prior is wrong and still follows
// a drift later. Quantile(z) is the factor exp(mean + z * sigma) by which a prediction is scaled
// to be exceeded with the normal tail probability of z (the ratio taken as log-normal). Values
// that are not finite and positive are ignored. A value type, not thread-safe: Quantile is const
// but caches its last answer, so even concurrent const calls need the caller's lock.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gshare {

class LogStats {
 public:
  static constexpr double kPriorSigma = 0.1;
  static constexpr double kPriorWeight = 1.0;
  static constexpr double kFloorWeight = 1.0 / 32.0;

  // A ratio observed (elapsed / predicted).
  void Observe(double ratio) {
    if (!(ratio > 0.0) || !std::isfinite(ratio)) return;
    const double x = std::log(ratio);
    count_ += 1;
    const double w = std::max(1.0 / (static_cast<double>(count_) + kPriorWeight), kFloorWeight);
    const double delta = x - mean_;
    mean_ += w * delta;
    // The exponentially weighted variance (West's update): var' = (1 - w) (var + w delta^2).
    variance_ = (1.0 - w) * (variance_ + w * delta * delta);
    cached_z_ = kNoZ;
  }

  // exp(mean + z sigma): the factor a prediction is multiplied by (kept for the last z asked, as
  // a policy asks with one z many times between observations).
  double Quantile(double z) const {
    if (z != cached_z_) {
      cached_factor_ = std::exp(mean_ + z * std::sqrt(variance_));
      cached_z_ = z;
    }
    return cached_factor_;
  }
  double mean() const { return mean_; }
  double sigma() const { return std::sqrt(variance_); }
  std::uint64_t count() const { return count_; }

 private:
  double mean_ = 0.0;
  double variance_ = kPriorSigma * kPriorSigma;
  std::uint64_t count_ = 0;
  static constexpr double kNoZ = -1e300;
  mutable double cached_z_ = kNoZ;
  mutable double cached_factor_ = 1.0;
};

// The standard normal quantile: z such that P(Z <= z) = p, for p in (0, 1) (bisection on erfc;
// computed once per policy, not per decision).
inline double NormalQuantile(double p) {
  double lo = -10.0;
  double hi = 10.0;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    if (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return (lo + hi) / 2;
}

}  // namespace gshare
