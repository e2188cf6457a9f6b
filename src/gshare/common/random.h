// Random: a small, portable, seeded random generator (xoshiro256**, seeded by SplitMix64).
//
// The same seed gives the same sequence on every platform and standard library, unlike the
// std:: distributions, whose algorithms are implementation-defined. Not thread-safe.
#pragma once

#include <cmath>
#include <cstdint>

namespace gshare {

class Random {
 public:
  explicit Random(std::uint64_t seed) {
    for (auto& s : state_) s = SplitMix(seed);
  }

  std::uint64_t NextU64() {
    const std::uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n). Precondition: n > 0.
  std::uint64_t Below(std::uint64_t n) {
    return static_cast<std::uint64_t>(Uniform() * static_cast<double>(n)) % n;
  }
  // Exponential with the given rate (mean 1/rate). Precondition: rate > 0.
  double Exponential(double rate) { return -std::log1p(-Uniform()) / rate; }
  bool Bernoulli(double p) { return Uniform() < p; }

  // A generator for a sub-stream: deterministic given this generator's state, independent enough
  // for per-function streams.
  Random Fork() { return Random(NextU64()); }

 private:
  static std::uint64_t Rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t SplitMix(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t state_[4];
};

}  // namespace gshare
