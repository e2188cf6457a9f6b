#include "gshare/serve/log_tail.h"

#include <gtest/gtest.h>

#include <fstream>

#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::serve {
namespace {

TEST(LogTailTest, TheLastLinesWithoutTheNodesPathsAndPids) {
  TempDirForTest dir;
  ASSERT_FALSE(dir.path().empty());
  const auto models = dir.path() / "models" / "acme";
  const auto log = dir.path() / "echo.log";
  {
    std::ofstream out(log);
    out << "loading\n"
        << "reading " << (models / "nets/m.pt").string() << "\n"
        << "listening on " << (dir.path() / "run/instances/7/socket").string() << "\n"
        << "instance 7 of echo (pid 4242) exited with status 3\n"
        << "a line still being writ";
  }
  auto tail = LogTail(log, models, 100);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_EQ(*tail, (std::vector<std::string>{
                       "loading", "reading nets/m.pt", "listening on (a node path)",
                       "an instance of echo exited with status 3", "a line still being writ"}));
  auto two = LogTail(log, models, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2u);
  EXPECT_EQ(two->back(), "a line still being writ");
  // Only what is read from the end counts: the first line read is cut at its start.
  auto cut = LogTail(log, models, 100, 10);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(*cut, std::vector<std::string>{"being writ"});
  EXPECT_EQ(LogTail(dir.path() / "none.log", models, 10).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gshare::serve
