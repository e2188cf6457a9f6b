#include "gshare/device/chunk_digest.h"

#include <cstring>

namespace gshare {

// On x86-64 a second version for AVX-512 (its 64-bit multiply doubles the speed), chosen at load.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "default")))
#endif
std::uint64_t
ChunkDigest(std::span<const std::byte> bytes) {
  const std::size_t words = bytes.size() / 8;
  const std::byte* data = bytes.data();
  // Four independent sums keep the multipliers busy; the sum is the same in any order.
  std::uint64_t sum[4] = {0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    std::uint64_t w[4];
    std::memcpy(w, data + i * 8, sizeof(w));  // little-endian hosts only (x86-64, arm64 Linux)
    for (int k = 0; k < 4; ++k) sum[k] += DigestMix(w[k] ^ ((i + k + 1) * kDigestKey));
  }
  for (; i < words; ++i) {
    std::uint64_t w = 0;
    std::memcpy(&w, data + i * 8, 8);
    sum[0] += DigestMix(w ^ ((i + 1) * kDigestKey));
  }
  if (const std::size_t tail = bytes.size() % 8; tail != 0) {
    std::uint64_t w = 0;
    std::memcpy(&w, data + words * 8, tail);
    sum[0] += DigestMix(w ^ ((words + 1) * kDigestKey));
  }
  return sum[0] + sum[1] + sum[2] + sum[3] +
         DigestMix(static_cast<std::uint64_t>(bytes.size()) ^ kDigestLengthKey);
}

}  // namespace gshare
