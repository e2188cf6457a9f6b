#include "gshare/common/units.h"

#include <fmt/format.h>
#include <cctype>
#include <charconv>
#include <cmath>

namespace gshare {
namespace {

// Splits "1.5Gi" into the number 1.5 and the suffix "Gi".
Result<std::pair<double, std::string_view>> SplitQuantity(std::string_view text,
                                                          std::string_view what) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  if (text.empty()) return InvalidArgument(fmt::format("empty {}", what));
  std::size_t end = 0;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
          text[end] == '-' || text[end] == '+' ||
          ((text[end] == 'e' || text[end] == 'E') && end + 1 < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[end + 1])) || text[end + 1] == '-')))) {
    ++end;
  }
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, value);
  if (ec != std::errc() || ptr != text.data() + end || end == 0) {
    return InvalidArgument(fmt::format("'{}' is not a {}", text, what));
  }
  if (value < 0 || !std::isfinite(value)) {
    return InvalidArgument(
        fmt::format("'{}': a {} must be a finite non-negative number", text, what));
  }
  std::string_view suffix = text.substr(end);
  while (!suffix.empty() && std::isspace(static_cast<unsigned char>(suffix.front()))) {
    suffix.remove_prefix(1);
  }
  return std::pair<double, std::string_view>{value, suffix};
}

}  // namespace

Result<std::uint64_t> ParseBytes(std::string_view text) {
  GSHARE_ASSIGN_OR_RETURN(auto parts, SplitQuantity(text, "byte quantity"));
  auto [value, suffix] = parts;
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b') && suffix != "b") {
    suffix.remove_suffix(1);
  }
  double scale = 1;
  if (suffix.empty())
    scale = 1;
  else if (suffix == "Ki" || suffix == "ki")
    scale = 0x1p10;
  else if (suffix == "Mi")
    scale = 0x1p20;
  else if (suffix == "Gi")
    scale = 0x1p30;
  else if (suffix == "Ti")
    scale = 0x1p40;
  else if (suffix == "K" || suffix == "k")
    scale = 1e3;
  else if (suffix == "M")
    scale = 1e6;
  else if (suffix == "G")
    scale = 1e9;
  else if (suffix == "T")
    scale = 1e12;
  else {
    return InvalidArgument(fmt::format(
        "'{}': unknown byte unit '{}' (use Ki, Mi, Gi, Ti or K, M, G, T)", text, suffix));
  }
  const double bytes = std::round(value * scale);
  if (bytes > 1.8e19) return OutOfRange(fmt::format("'{}' is too large a byte quantity", text));
  return static_cast<std::uint64_t>(bytes);
}

Result<Duration> ParseDuration(std::string_view text) {
  GSHARE_ASSIGN_OR_RETURN(auto parts, SplitQuantity(text, "duration"));
  auto [value, suffix] = parts;
  double ns_per_unit = 0;
  if (suffix == "ns")
    ns_per_unit = 1;
  else if (suffix == "us" || suffix == "µs")
    ns_per_unit = 1e3;
  else if (suffix == "ms")
    ns_per_unit = 1e6;
  else if (suffix == "s")
    ns_per_unit = 1e9;
  else if (suffix == "m" || suffix == "min")
    ns_per_unit = 60e9;
  else if (suffix == "h")
    ns_per_unit = 3600e9;
  else if (suffix == "d")
    ns_per_unit = 86400e9;
  else if (suffix.empty()) {
    return InvalidArgument(
        fmt::format("'{}': a duration needs a unit (ns, us, ms, s, m, h, d)", text));
  } else {
    return InvalidArgument(
        fmt::format("'{}': unknown duration unit '{}' (use ns, us, ms, s, m, h, d)", text, suffix));
  }
  const double ns = std::round(value * ns_per_unit);
  if (ns > 9.2e18) return OutOfRange(fmt::format("'{}' is too long a duration", text));
  return Duration(static_cast<std::int64_t>(ns));
}

Result<Duration> DurationFromSeconds(double seconds) {
  if (!std::isfinite(seconds)) {
    return InvalidArgument(fmt::format("{} is not a number of seconds", seconds));
  }
  // 9.2e9 s is just inside the int64 nanoseconds of a Duration.
  if (std::fabs(seconds) > 9.2e9) {
    return OutOfRange(fmt::format("{} s is beyond what a duration holds", seconds));
  }
  return FromSeconds(seconds);
}

std::string FormatBytes(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= kGiB) return fmt::format("{:.2f} GiB", b / 0x1p30);
  if (bytes >= kMiB) return fmt::format("{:.1f} MiB", b / 0x1p20);
  if (bytes >= kKiB) return fmt::format("{:.1f} KiB", b / 0x1p10);
  return fmt::format("{} B", bytes);
}

std::string FormatDuration(Duration d) {
  const auto ns = d.count();
  if (ns == 0) return "0s";
  const double abs_ns = std::fabs(static_cast<double>(ns));
  if (abs_ns < 1e3) return fmt::format("{}ns", ns);
  if (abs_ns < 1e6) return fmt::format("{:g}us", static_cast<double>(ns) / 1e3);
  if (abs_ns < 1e9) return fmt::format("{:g}ms", static_cast<double>(ns) / 1e6);
  if (abs_ns < 60e9) return fmt::format("{:g}s", static_cast<double>(ns) / 1e9);
  if (abs_ns < 3600e9) return fmt::format("{:g}m", static_cast<double>(ns) / 60e9);
  return fmt::format("{:g}h", static_cast<double>(ns) / 3600e9);
}

Duration TransferTime(std::uint64_t bytes, double bytes_per_second) {
  if (bytes_per_second <= 0) return Duration::zero();
  return FromSeconds(static_cast<double>(bytes) / bytes_per_second);
}

}  // namespace gshare
