#include "gshare/device/gpu_uuid.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(GpuUuidTest, FormatsAndParsesEveryKind) {
  GpuUuid uuid;
  for (int i = 0; i < 16; ++i) uuid.bytes[i] = static_cast<std::uint8_t>(0x10 * (i % 16) + i);
  uuid.kind = GpuUuidKind::kGpu;
  EXPECT_EQ(FormatGpuUuid(uuid), "GPU-00112233-4455-6677-8899-aabbccddeeff");
  uuid.kind = GpuUuidKind::kMig;
  EXPECT_EQ(FormatGpuUuid(uuid), "MIG-00112233-4455-6677-8899-aabbccddeeff");
  uuid.kind = GpuUuidKind::kEmulated;
  EXPECT_EQ(FormatGpuUuid(uuid), "EMU-00112233-4455-6677-8899-aabbccddeeff");
  for (GpuUuidKind kind : {GpuUuidKind::kGpu, GpuUuidKind::kMig, GpuUuidKind::kEmulated}) {
    uuid.kind = kind;
    auto parsed = ParseGpuUuid(FormatGpuUuid(uuid));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, uuid);
  }
}

TEST(GpuUuidTest, ParsesUppercaseHex) {
  auto parsed = ParseGpuUuid("MIG-5F0C1A2B-3C4D-5E6F-7A8B-9C0D1E2F3A4B");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->kind, GpuUuidKind::kMig);
  EXPECT_EQ(parsed->bytes[0], 0x5f);
  EXPECT_EQ(parsed->bytes[15], 0x4b);
  EXPECT_EQ(FormatGpuUuid(*parsed), "MIG-5f0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b");
}

TEST(GpuUuidTest, RejectsBadTextSayingWhy) {
  const struct {
    const char* text;
    const char* why;
  } cases[] = {
      {"", "unknown prefix"},
      {"GPU", "unknown prefix"},
      {"gpu-5f0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b", "unknown prefix"},
      {"CPU-5f0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b", "unknown prefix"},
      {"GPU-", "4 characters, not 40"},
      {"GPU-5f0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4", "39 characters"},
      {"GPU-5f0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b0", "41 characters"},
      {"GPU-5f0c1a2b3c4d-5e6f-7a8b-9c0d1e2f3a4b-", "where a dash belongs, at 12"},
      {"GPU-5f0c1a2g-3c4d-5e6f-7a8b-9c0d1e2f3a4b", "'g' is not a hex digit, at 11"},
      {"GPU-5f0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4 ", "' ' is not a hex digit, at 39"},
      {"MIG-GPU-5f0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b/1/0", "old MIG-GPU-"},
  };
  for (const auto& c : cases) {
    auto parsed = ParseGpuUuid(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.why), std::string::npos)
        << c.text << ": " << parsed.status().message();
  }
}

TEST(GpuUuidTest, TellsMigDevicesByName) {
  EXPECT_TRUE(IsMigDeviceName("NVIDIA A100-SXM4-40GB MIG 1g.5gb"));
  EXPECT_TRUE(IsMigDeviceName("NVIDIA H100 80GB HBM3 MIG 3g.40gb"));
  EXPECT_TRUE(IsMigDeviceName("MIG 7g.80gb"));
  EXPECT_FALSE(IsMigDeviceName("NVIDIA H100 80GB HBM3"));
  EXPECT_FALSE(IsMigDeviceName("NVIDIA MIGHTY"));
  EXPECT_FALSE(IsMigDeviceName(""));
}

}  // namespace
}  // namespace gshare
