// Fuzz target: the parsers of human quantities (bytes, durations, slice granularities).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gshare/common/slice_granularity.h"
#include "gshare/common/units.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto bytes = gshare::ParseBytes(text); bytes.ok()) (void)gshare::FormatBytes(*bytes);
  if (auto duration = gshare::ParseDuration(text); duration.ok()) {
    if (duration->count() < 0) __builtin_trap();
    (void)gshare::FormatDuration(*duration);
  }
  if (auto granularity = gshare::SliceGranularity::Parse(text); granularity.ok()) {
    if (granularity->bytes() % gshare::SliceGranularity::kPageBytes != 0) __builtin_trap();
  }
  return 0;
}
