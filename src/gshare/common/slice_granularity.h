// SliceGranularity: the one step that every vGPU slice's memory quota is a multiple of.
//
// One value for the whole program: the command line parses it once (Parse), and the same value
// is passed to the vGPU manager, the policies and the simulator, so they cannot disagree. Valid
// values are multiples of 2 MiB (the page size at which GPU memory is mapped) from 2 MiB to
// 64 GiB; the default is 128 MiB. Value type; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/common/units.h"

namespace gshare {

class SliceGranularity {
 public:
  static constexpr std::uint64_t kDefaultBytes = 128 * kMiB;
  static constexpr std::uint64_t kPageBytes = 2 * kMiB;
  static constexpr std::uint64_t kMaxBytes = 64 * kGiB;

  // The default: 128 MiB.
  constexpr SliceGranularity() = default;

  // InvalidArgument unless `bytes` is a multiple of 2 MiB in [2 MiB, 64 GiB].
  static Result<SliceGranularity> FromBytes(std::uint64_t bytes);
  // Parses a byte quantity ("128Mi", "1Gi") and validates it as FromBytes does.
  static Result<SliceGranularity> Parse(std::string_view text);

  constexpr std::uint64_t bytes() const { return bytes_; }
  // As Parse reads it: "128Mi", "2Gi" (flags print their default with it).
  std::string ToText() const;
  // The smallest multiple of the granularity that holds `bytes` (0 stays 0).
  constexpr std::uint64_t RoundUp(std::uint64_t bytes) const {
    return (bytes + bytes_ - 1) / bytes_ * bytes_;
  }
  constexpr std::uint64_t RoundDown(std::uint64_t bytes) const { return bytes / bytes_ * bytes_; }
  constexpr bool Divides(std::uint64_t bytes) const { return bytes % bytes_ == 0; }

  friend constexpr bool operator==(SliceGranularity, SliceGranularity) = default;

 private:
  constexpr explicit SliceGranularity(std::uint64_t bytes) : bytes_(bytes) {}
  std::uint64_t bytes_ = kDefaultBytes;
};

}  // namespace gshare
