#include "gshare/common/proc_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <memory>

namespace gshare {
namespace {

// The memory lines of a real status file (Linux 6.x), among the lines around them.
constexpr const char* kStatus =
    "Name:\tgshare\n"
    "Umask:\t0022\n"
    "State:\tS (sleeping)\n"
    "Pid:\t6548\n"
    "VmPeak:\t 3012345 kB\n"
    "VmSize:\t 2987654 kB\n"
    "VmHWM:\t  2800000 kB\n"
    "VmRSS:\t  2762364 kB\n"
    "RssAnon:\t   283764 kB\n"
    "RssFile:\t    10600 kB\n"
    "RssShmem:\t  2468000 kB\n"
    "VmData:\t  400000 kB\n"
    "Threads:\t9\n"
    "voluntary_ctxt_switches:\t150\n";

TEST(ProcMemoryTest, ParsesTheResidentSetAndItsParts) {
  auto memory = ParseProcStatus(kStatus);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  EXPECT_EQ(memory->rss_bytes, 2762364ull * 1024);
  EXPECT_EQ(memory->rss_anon_bytes, 283764ull * 1024);
  EXPECT_EQ(memory->rss_file_bytes, 10600ull * 1024);
  EXPECT_EQ(memory->rss_shmem_bytes, 2468000ull * 1024);
  EXPECT_EQ(memory->peak_rss_bytes, 2800000ull * 1024);
}

TEST(ProcMemoryTest, MissingPartsAreZeroAndAMissingResidentSetIsAnError) {
  auto only_rss = ParseProcStatus("Name:\tx\nVmRSS:\t 8 kB\n");
  ASSERT_TRUE(only_rss.ok());
  EXPECT_EQ(only_rss->rss_bytes, 8192u);
  EXPECT_EQ(only_rss->rss_anon_bytes, 0u);
  EXPECT_EQ(only_rss->rss_shmem_bytes, 0u);

  auto kernel_thread = ParseProcStatus("Name:\tkthreadd\nState:\tS (sleeping)\n");
  ASSERT_FALSE(kernel_thread.ok());
  EXPECT_EQ(kernel_thread.status().code(), StatusCode::kInvalidArgument);
}

TEST(ProcMemoryTest, RejectsMalformedSizes) {
  for (const char* bad :
       {"VmRSS:\t abc kB\n", "VmRSS:\t 12 MB\n", "VmRSS:\t 12\n",
        "VmRSS:\t 1 kB\nRssAnon:\t -3 kB\n", "VmRSS:\t 99999999999999999999 kB\n"}) {
    auto memory = ParseProcStatus(bad);
    EXPECT_FALSE(memory.ok()) << bad;
  }
}

TEST(ProcMemoryTest, ReadsThisProcessPlausibly) {
  // Touch 32 MiB of our own so the resident set is at least that.
  constexpr std::size_t kBytes = 32u << 20;
  auto block = std::make_unique<char[]>(kBytes);
  std::memset(block.get(), 1, kBytes);
  auto own = ReadOwnMemory();
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_GE(own->rss_bytes, kBytes);
  EXPECT_GE(own->rss_anon_bytes, kBytes);
  EXPECT_LE(own->rss_anon_bytes + own->rss_file_bytes + own->rss_shmem_bytes,
            own->rss_bytes + 4096 * 64);  // the kernel's per-CPU counters may lag a little
  EXPECT_EQ(own->rss_bytes % 1024, 0u);
  volatile char keep = block[kBytes - 1];
  (void)keep;

  auto by_pid = ReadProcessMemory(::getpid());
  ASSERT_TRUE(by_pid.ok()) << by_pid.status().ToString();
  EXPECT_GE(by_pid->rss_bytes, kBytes);
}

TEST(ProcMemoryTest, AProcessThatIsGoneIsNotFound) {
  // pid_max is at most 4194304 (2^22): a larger pid never exists.
  auto gone = ReadProcessMemory(static_cast<pid_t>(1 << 30));
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gshare
