// RandomBytes: reproducible pseudo-random bytes for tests (gshare::Random, by seed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gshare/common/random.h"

namespace gshare::testing {

inline std::vector<std::byte> RandomBytes(std::size_t n, std::uint64_t seed) {
  Random random(seed);
  std::vector<std::byte> bytes(n);
  for (auto& b : bytes) b = static_cast<std::byte>(random.NextU64());
  return bytes;
}

}  // namespace gshare::testing
