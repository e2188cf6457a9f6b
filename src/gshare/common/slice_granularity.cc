#include "gshare/common/slice_granularity.h"

#include <fmt/format.h>

namespace gshare {

Result<SliceGranularity> SliceGranularity::FromBytes(std::uint64_t bytes) {
  if (bytes < kPageBytes || bytes > kMaxBytes || bytes % kPageBytes != 0) {
    return InvalidArgument(fmt::format(
        "slice granularity {} ({} bytes) must be a multiple of 2Mi between 2Mi and 64Gi",
        FormatBytes(bytes), bytes));
  }
  return SliceGranularity(bytes);
}

Result<SliceGranularity> SliceGranularity::Parse(std::string_view text) {
  GSHARE_ASSIGN_OR_RETURN(const std::uint64_t bytes, ParseBytes(text));
  return FromBytes(bytes);
}

std::string SliceGranularity::ToText() const {
  if (bytes_ % kGiB == 0) return std::to_string(bytes_ / kGiB) + "Gi";
  return std::to_string(bytes_ / kMiB) + "Mi";  // a multiple of 2 MiB
}

}  // namespace gshare
