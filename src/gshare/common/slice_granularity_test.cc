#include "gshare/common/slice_granularity.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(SliceGranularityTest, DefaultsTo128MiB) {
  EXPECT_EQ(SliceGranularity().bytes(), 128 * kMiB);
  EXPECT_EQ(SliceGranularity().RoundUp(1), 128 * kMiB);
  EXPECT_EQ(SliceGranularity().RoundUp(128 * kMiB), 128 * kMiB);
  EXPECT_EQ(SliceGranularity().RoundUp(128 * kMiB + 1), 256 * kMiB);
  EXPECT_EQ(SliceGranularity().RoundDown(255 * kMiB), 128 * kMiB);
  EXPECT_EQ(SliceGranularity().RoundUp(0), 0u);
}

TEST(SliceGranularityTest, AcceptsMultiplesOfTheGpuPage) {
  auto g = SliceGranularity::Parse("100Mi");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->bytes(), 100 * kMiB);
  EXPECT_EQ(g->RoundUp(150 * kMiB), 200 * kMiB);
  EXPECT_TRUE(g->Divides(300 * kMiB));
  EXPECT_FALSE(g->Divides(128 * kMiB));
  EXPECT_EQ(SliceGranularity::Parse("2Mi")->bytes(), 2 * kMiB);
  EXPECT_EQ(SliceGranularity::Parse("64Gi")->bytes(), 64 * kGiB);
}

TEST(SliceGranularityTest, RejectsWhatNoGpuCouldMap) {
  for (const char* text : {"0", "1Mi", "3Mi", "1000000", "65Gi", "12Qi", "-128Mi", ""}) {
    auto g = SliceGranularity::Parse(text);
    EXPECT_FALSE(g.ok()) << text;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << text;
  }
}

}  // namespace
}  // namespace gshare
