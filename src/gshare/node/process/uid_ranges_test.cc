#include "gshare/node/process/uid_ranges.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

namespace gshare {
namespace {

// A fresh folder, removed with what it holds when the object goes.
class ScratchDir {
 public:
  ScratchDir() {
    char pattern[] = "/tmp/gshare-uid-ranges-test-XXXXXX";
    if (::mkdtemp(pattern) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// An owner: a folder that exists, as a server's data directory does.
std::string Owner(const ScratchDir& dir, const std::string& name) {
  const auto path = dir.path() / name;
  std::filesystem::create_directories(path);
  return path.string();
}

// Two servers get disjoint ranges; each gets its own again in a later run; a third takes the
// next free one; the ledger says who holds what; a removed owner's range goes to the next claim.
TEST(UidRangesTest, OwnersGetDisjointRangesKeptWhileTheyExist) {
  ScratchDir dir;
  const auto ledger = dir.path() / "host" / "uid-ranges";
  const std::string a_dir = Owner(dir, "a"), b_dir = Owner(dir, "b"), c_dir = Owner(dir, "c");
  auto a = ClaimUidRange(ledger, a_dir);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = ClaimUidRange(ledger, b_dir);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->first, 70000u);
  EXPECT_EQ(a->count, 10000u);
  EXPECT_EQ(b->first, 80000u);
  auto again = ClaimUidRange(ledger, a_dir);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->first, 70000u);
  EXPECT_EQ(ReadAll(ledger), "70000 10000 " + a_dir + "\n80000 10000 " + b_dir + "\n");
  // A claim someone wrote by hand in the middle is stepped over, not overlapped.
  std::ofstream(ledger, std::ios::app) << "95000 100 " << dir.path().string() << "\n";
  auto c = ClaimUidRange(ledger, c_dir);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->first, 100000u);
  // a's data directory is gone: its range is free again, and b keeps its own.
  std::filesystem::remove_all(a_dir);
  auto d = ClaimUidRange(ledger, Owner(dir, "d"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->first, 70000u);
  EXPECT_EQ(ClaimUidRange(ledger, b_dir)->first, 80000u);
}

TEST(UidRangesTest, ConcurrentClaimsFromSeveralProcessesNeverOverlap) {
  ScratchDir dir;
  const auto ledger = dir.path() / "uid-ranges";
  constexpr int kProcesses = 8;
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto claimed = ClaimUidRange(ledger, Owner(dir, "node" + std::to_string(i)));
      ::_exit(claimed.ok() ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::set<uid_t> firsts;
  for (int i = 0; i < kProcesses; ++i) {
    auto claimed = ClaimUidRange(ledger, Owner(dir, "node" + std::to_string(i)));  // held
    ASSERT_TRUE(claimed.ok());
    firsts.insert(claimed->first);
  }
  EXPECT_EQ(firsts.size(), static_cast<std::size_t>(kProcesses));
  EXPECT_EQ(*firsts.begin(), 70000u);
  EXPECT_EQ(*firsts.rbegin(), 70000u + (kProcesses - 1) * 10000u);
}

TEST(UidRangesTest, BadOwnersLedgersAndAFullHostAreErrors) {
  ScratchDir dir;
  const auto ledger = dir.path() / "uid-ranges";
  EXPECT_EQ(ClaimUidRange(ledger, "relative").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ClaimUidRange(ledger, "/two\nlines").status().code(), StatusCode::kInvalidArgument);
  // A space is part of the owner's name (the rest of the line).
  const std::string spaced = Owner(dir, "with space");
  auto with_space = ClaimUidRange(ledger, spaced);
  ASSERT_TRUE(with_space.ok()) << with_space.status().ToString();
  EXPECT_EQ(ClaimUidRange(ledger, spaced)->first, with_space->first);
  auto full =
      ClaimUidRange(ledger, Owner(dir, "a"), {.lowest = 1000, .count = 10, .highest = 1010});
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(ClaimUidRange(ledger, Owner(dir, "b"), {.lowest = 1000, .count = 10, .highest = 1010})
                .status()
                .code(),
            StatusCode::kResourceExhausted);
  std::ofstream(ledger, std::ios::app) << "not a claim\n";
  const auto broken = ClaimUidRange(ledger, Owner(dir, "c"));
  EXPECT_EQ(broken.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(broken.status().message().find("line 3"), std::string::npos)
      << broken.status().message();
}

}  // namespace
}  // namespace gshare
