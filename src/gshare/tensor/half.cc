#include "gshare/tensor/half.h"

#include <cmath>
#include <cstdint>

namespace gshare {

double HalfToDouble(Half h) {
  const bool negative = (h.bits & 0x8000u) != 0;
  const int exponent = (h.bits >> 10) & 0x1f;
  const int mantissa = h.bits & 0x3ff;
  double magnitude = 0.0;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa + 1024), exponent - 25);
  }
  return negative ? -magnitude : magnitude;
}

std::optional<Half> DoubleToHalf(double value) {
  if (!std::isfinite(value)) return std::nullopt;
  const std::uint16_t sign = std::signbit(value) ? 0x8000u : 0u;
  const double magnitude = std::fabs(value);
  if (magnitude == 0.0) return Half{sign};
  int frexp_exponent = 0;
  (void)std::frexp(magnitude, &frexp_exponent);
  const int exponent = frexp_exponent - 1;  // magnitude in [2^exponent, 2^(exponent+1))
  // The spacing of halves near `magnitude`: 2^(exponent-10) for normals, 2^-24 below 2^-14.
  const int quantum_exponent = exponent < -14 ? -24 : exponent - 10;
  if (exponent > 15) return std::nullopt;
  // Exact: scaling by a power of two, and the result is below 2^11.
  const double scaled = std::ldexp(magnitude, -quantum_exponent);
  double units = std::floor(scaled);
  const double remainder = scaled - units;
  if (remainder > 0.5 || (remainder == 0.5 && std::fmod(units, 2.0) != 0.0)) units += 1.0;
  const auto n = static_cast<std::uint32_t>(units);
  std::uint32_t bits = 0;
  if (exponent < -14) {
    bits = n;  // subnormal; n == 1024 is the smallest normal, whose bits are 0x400
  } else {
    // n is in [1024, 2048]; 2048 carries into the exponent field.
    bits = (static_cast<std::uint32_t>(exponent + 15) << 10) + n - 1024;
  }
  if (bits >= 0x7c00u) return std::nullopt;  // rounded up to infinity
  return Half{static_cast<std::uint16_t>(sign | bits)};
}

}  // namespace gshare
