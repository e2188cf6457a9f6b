// Units of gshare: bytes and time, with parsing of human quantities.
//
// Byte counts are std::uint64_t named with a `_bytes` suffix. Time is std::chrono: a Duration is
// nanoseconds, and a TimePoint is nanoseconds since the epoch of the Clock that produced it
// (simulation start for a simulated clock, an arbitrary steady origin for a live one).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare {

using Duration = std::chrono::nanoseconds;

// The timeline that TimePoints live on. It has no now(): time is read from a Clock only.
struct Timeline {
  using rep = Duration::rep;
  using period = Duration::period;
  using duration = Duration;
  static constexpr bool is_steady = true;
};
using TimePoint = std::chrono::time_point<Timeline, Duration>;

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;

// Parses "512Mi", "8Gi", "98MiB", "1.5G", "4096" (bytes). Binary suffixes Ki/Mi/Gi/Ti (with an
// optional B) are powers of 1024; K/M/G/T (with an optional B) are powers of 1000. Fractions are
// allowed and rounded to the nearest byte. Negative values and unknown suffixes are errors.
Result<std::uint64_t> ParseBytes(std::string_view text);

// Parses "15m", "200ms", "1.5s", "2h", "100us", "250ns", "1d". A bare number is an error: a
// duration must carry its unit. Negative durations are errors.
Result<Duration> ParseDuration(std::string_view text);

// "98.0 MiB", "1.50 GiB": for reports, not for parsing back.
std::string FormatBytes(std::uint64_t bytes);
// "3.3ms", "15m", "1.250s": for reports.
std::string FormatDuration(Duration d);

constexpr double ToSeconds(Duration d) { return static_cast<double>(d.count()) * 1e-9; }
constexpr double ToMilliseconds(Duration d) { return static_cast<double>(d.count()) * 1e-6; }
// The checked conversion for seconds that come from outside (a file, a flag): InvalidArgument
// for NaN or an infinity, OutOfRange beyond what a Duration holds (about 292 years).
Result<Duration> DurationFromSeconds(double seconds);
// Unchecked: for seconds the program computed itself and knows to be in range.
constexpr Duration FromSeconds(double s) {
  return Duration(static_cast<std::int64_t>(s * 1e9 + (s >= 0 ? 0.5 : -0.5)));
}
constexpr Duration FromMilliseconds(double ms) { return FromSeconds(ms * 1e-3); }
constexpr double SinceEpochSeconds(TimePoint t) { return ToSeconds(t.time_since_epoch()); }
constexpr TimePoint AtSeconds(double s) { return TimePoint(FromSeconds(s)); }

// Time to move `bytes` over a link of `bytes_per_second`; zero bandwidth means unpaced (zero).
Duration TransferTime(std::uint64_t bytes, double bytes_per_second);

}  // namespace gshare
