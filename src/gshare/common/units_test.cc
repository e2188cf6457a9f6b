#include "gshare/common/units.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gshare {
namespace {

using std::chrono::milliseconds;

TEST(UnitsTest, ParsesByteQuantities) {
  EXPECT_EQ(*ParseBytes("512Mi"), 512ull * 1024 * 1024);
  EXPECT_EQ(*ParseBytes("8Gi"), 8ull << 30);
  EXPECT_EQ(*ParseBytes("98MiB"), 98ull << 20);
  EXPECT_EQ(*ParseBytes("1.5G"), 1'500'000'000ull);
  EXPECT_EQ(*ParseBytes("4096"), 4096ull);
  EXPECT_EQ(*ParseBytes(" 2Ki "), 2048ull);
  EXPECT_EQ(*ParseBytes("100MB"), 100'000'000ull);
}

TEST(UnitsTest, RejectsBadByteQuantities) {
  for (const char* bad : {"", "abc", "-1Gi", "12Qi", "1.2.3Mi", "Mi"}) {
    const auto r = ParseBytes(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(UnitsTest, ParsesDurations) {
  EXPECT_EQ(*ParseDuration("15m"), std::chrono::minutes(15));
  EXPECT_EQ(*ParseDuration("200ms"), milliseconds(200));
  EXPECT_EQ(*ParseDuration("1.5s"), milliseconds(1500));
  EXPECT_EQ(*ParseDuration("3.3ms"), std::chrono::microseconds(3300));
  EXPECT_EQ(*ParseDuration("2h"), std::chrono::hours(2));
  EXPECT_EQ(*ParseDuration("100us"), std::chrono::microseconds(100));
  EXPECT_EQ(*ParseDuration("250ns"), std::chrono::nanoseconds(250));
  EXPECT_EQ(*ParseDuration("1d"), std::chrono::hours(24));
}

TEST(UnitsTest, RejectsBadDurations) {
  for (const char* bad : {"", "15", "fast", "-3s", "3 parsecs", "1e400s"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
  EXPECT_NE(ParseDuration("15").status().message().find("unit"), std::string::npos);
}

TEST(UnitsTest, FormatsAndConverts) {
  EXPECT_EQ(FormatBytes(98ull << 20), "98.0 MiB");
  EXPECT_EQ(FormatBytes(3ull << 29), "1.50 GiB");
  EXPECT_EQ(FormatDuration(milliseconds(200)), "200ms");
  EXPECT_EQ(FormatDuration(std::chrono::minutes(15)), "15m");
  EXPECT_DOUBLE_EQ(ToSeconds(milliseconds(1500)), 1.5);
  EXPECT_EQ(TransferTime(1'000'000'000, 1e9), std::chrono::seconds(1));
  EXPECT_EQ(TransferTime(1'000, 0), Duration::zero());
}

TEST(UnitsTest, DurationFromSecondsIsChecked) {
  EXPECT_EQ(*DurationFromSeconds(1.5), std::chrono::milliseconds(1500));
  EXPECT_EQ(DurationFromSeconds(std::nan("")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DurationFromSeconds(1.0 / 0.0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DurationFromSeconds(1e12).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(DurationFromSeconds(-1e12).status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(DurationFromSeconds(9e9).ok());
}

}  // namespace
}  // namespace gshare
