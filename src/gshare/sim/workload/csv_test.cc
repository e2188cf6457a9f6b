#include "gshare/sim/workload/csv.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(CsvFileTest, SplitsTrimsAndCountsLines) {
  CsvFile csv = CsvFile::FromText("a, b ,c\r\n\n\n1,,3\nlast", "t.csv");
  std::vector<std::string_view> row;
  ASSERT_TRUE(csv.NextRow(row));
  EXPECT_EQ(csv.line(), 1u);
  ASSERT_EQ(row.size(), 3u);
  EXPECT_EQ(row[1], "b");
  EXPECT_EQ(row[2], "c");
  ASSERT_TRUE(csv.NextRow(row));
  EXPECT_EQ(csv.line(), 4u);  // blank lines are skipped but counted
  ASSERT_EQ(row.size(), 3u);
  EXPECT_EQ(row[1], "");
  ASSERT_TRUE(csv.NextRow(row));
  EXPECT_EQ(csv.line(), 5u);
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0], "last");
  EXPECT_EQ(csv.Error("boom").message(), "t.csv:5: boom");
  EXPECT_FALSE(csv.NextRow(row));
}

TEST(CsvFileTest, OpenReportsMissingFiles) {
  auto csv = CsvFile::Open("/nonexistent/gshare/none.csv");
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().code(), StatusCode::kNotFound);
}

TEST(CsvFileTest, ParsesNumbersStrictly) {
  double d = 0;
  EXPECT_TRUE(ParseDouble("1.5", d));
  EXPECT_DOUBLE_EQ(d, 1.5);
  EXPECT_TRUE(ParseDouble("+2e-3", d));
  EXPECT_DOUBLE_EQ(d, 0.002);
  EXPECT_FALSE(ParseDouble("1.5s", d));
  EXPECT_FALSE(ParseDouble("", d));
  EXPECT_FALSE(ParseDouble("nan", d));
  std::int64_t i = 0;
  EXPECT_TRUE(ParseInt64("-42", i));
  EXPECT_EQ(i, -42);
  EXPECT_FALSE(ParseInt64("4.2", i));
  EXPECT_EQ(FindColumn({"a", "b"}, "b"), 1);
  EXPECT_EQ(FindColumn({"a", "b"}, "c"), -1);
}

}  // namespace
}  // namespace gshare
