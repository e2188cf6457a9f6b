#include "gshare/device/chunk_digest.h"

#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "gshare/common/testing/random_bytes.h"
#include "gshare/common/units.h"
#include "gshare/device/device_registry.h"
#include "gshare/device/emulated/emulated_device.h"

namespace gshare {
namespace {

using ::gshare::testing::RandomBytes;

// The definition in chunk_digest.h, word by word, as the CUDA kernel computes it.
std::uint64_t ByDefinition(std::span<const std::byte> bytes) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i * 8 < bytes.size(); ++i) {
    std::uint64_t word = 0;
    for (std::size_t k = 0; k < 8 && i * 8 + k < bytes.size(); ++k) {
      word |= static_cast<std::uint64_t>(bytes[i * 8 + k]) << (8 * k);
    }
    sum += DigestMix(word ^ ((i + 1) * kDigestKey));
  }
  return sum + DigestMix(static_cast<std::uint64_t>(bytes.size()) ^ kDigestLengthKey);
}

TEST(ChunkDigestTest, MatchesItsDefinitionForEveryTailLength) {
  const auto bytes = RandomBytes(4096 + 15, 1);
  for (std::size_t size : {0, 1, 7, 8, 9, 31, 32, 33, 4096, 4096 + 15}) {
    const std::span<const std::byte> part(bytes.data(), size);
    EXPECT_EQ(ChunkDigest(part), ByDefinition(part)) << size << " bytes";
  }
}

TEST(ChunkDigestTest, AnyChangedByteChangesIt) {
  auto bytes = RandomBytes(64 * kKiB + 5, 2);
  const std::uint64_t before = ChunkDigest(bytes);
  for (std::size_t at : {std::size_t{0}, std::size_t{7}, std::size_t{4096}, bytes.size() - 1}) {
    for (std::byte flip : {std::byte{1}, std::byte{0x80}}) {
      bytes[at] ^= flip;
      EXPECT_NE(ChunkDigest(bytes), before) << "byte " << at;
      bytes[at] ^= flip;
    }
  }
  EXPECT_EQ(ChunkDigest(bytes), before);
}

TEST(ChunkDigestTest, WordsSwappedOrZerosAppendedChangeIt) {
  auto bytes = RandomBytes(1024, 3);
  const std::uint64_t before = ChunkDigest(bytes);
  std::swap_ranges(bytes.begin(), bytes.begin() + 8, bytes.begin() + 8);
  EXPECT_NE(ChunkDigest(bytes), before) << "positions count";
  std::vector<std::byte> zeros(64), longer(72);
  EXPECT_NE(ChunkDigest(zeros), ChunkDigest(longer)) << "the length counts";
}

TEST(ChunkDigestTest, AnEmulatedStreamDigestsDeviceMemoryByTheDefinition) {
  DeviceOptions options;
  options.backend = DeviceBackend::kEmulated;
  options.emulated = *ParseEmulatedGpus("1x16Mi", 0);
  auto set = OpenDevices(options);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  Device& device = *set->devices.front();
  auto buffer = device.Allocate(kMiB);
  ASSERT_TRUE(buffer.ok());
  const auto bytes = RandomBytes(kMiB, 4);
  auto memory = static_cast<EmulatedBuffer&>(**buffer).bytes();
  std::copy(bytes.begin(), bytes.end(), memory.begin());
  auto stream = device.CreateStream();
  ASSERT_TRUE(stream.ok());
  std::uint64_t digest = 0;
  ASSERT_TRUE((*stream)->Digest(**buffer, 4096, 1000, &digest).ok());
  std::promise<std::uint64_t> seen;
  (*stream)->Then([&](const Status& ran) { seen.set_value(ran.ok() ? digest : 0); });
  EXPECT_EQ(seen.get_future().get(), ChunkDigest(std::span(bytes).subspan(4096, 1000)));
  EXPECT_EQ((*stream)->Digest(**buffer, 4, 8, &digest).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*stream)->Digest(**buffer, kMiB - 8, 16, &digest).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace gshare
