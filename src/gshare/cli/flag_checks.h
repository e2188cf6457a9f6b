// Checks on numeric flags, applied before CLI11 converts the text, so that a value the program
// would silently wrap, truncate or carry as NaN is a clear error (exit status 2) instead.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

namespace gshare::cli {

// A finite number in [lo, hi] (not NaN, not an infinity).
inline CLI::Validator FiniteIn(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double value = 0;
        const char* first = text.data();
        const char* last = text.data() + text.size();
        const auto [end, error] = std::from_chars(first, last, value);
        if (text.empty() || error != std::errc() || end != last || !std::isfinite(value)) {
          return "'" + text + "' is not a finite number";
        }
        if (value < lo || value > hi) {
          return "'" + text + "' is outside [" + CLI::detail::to_string(lo) + ", " +
                 CLI::detail::to_string(hi) + "]";
        }
        return {};
      },
      "FINITE", "FiniteIn");
}

// A whole number in [lo, hi] written with digits only: no sign, no exponent, no wrap-around.
inline CLI::Validator WholeIn(std::uint64_t lo, std::uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* first = text.data();
        const char* last = text.data() + text.size();
        const auto [end, error] = std::from_chars(first, last, value);
        if (text.empty() || text.front() < '0' || text.front() > '9' || error != std::errc() ||
            end != last) {
          return "'" + text + "' is not a whole number from " + std::to_string(lo) + " to " +
                 std::to_string(hi);
        }
        if (value < lo || value > hi) {
          return "'" + text + "' is outside " + std::to_string(lo) + " to " + std::to_string(hi);
        }
        return {};
      },
      "WHOLE", "WholeIn");
}

// The largest seed: any 64-bit value.
inline constexpr std::uint64_t kMaxSeed = UINT64_MAX;

}  // namespace gshare::cli
