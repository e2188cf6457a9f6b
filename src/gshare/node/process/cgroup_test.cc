#include "gshare/node/process/cgroup.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "gshare/node/process/child_process.h"

namespace gshare {
namespace {

// A fake cgroup directory: plain files standing in for the kernel's.
class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gshare-cgroup-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::string dir_;
};

TEST(CgroupParseTest, MountAndOwnPath) {
  const std::string mountinfo =
      "31 24 0:27 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(FindCgroup2Mount(mountinfo), "/sys/fs/cgroup/unified");
  EXPECT_EQ(FindCgroup2Mount("31 24 0:27 / /x rw - tmpfs tmpfs rw\n"), std::nullopt);
  EXPECT_EQ(OwnCgroup2Path("4:memory:/a\n0::/system.slice/gshare.service\n"),
            "/system.slice/gshare.service");
  EXPECT_EQ(OwnCgroup2Path("4:memory:/a\n"), std::nullopt);
}

TEST_F(CgroupTest, NotDelegatedIsRefusedWithTheReason) {
  Write("cgroup.controllers", "hugetlb\n");
  const CgroupDecision decision = DecideCgroups(dir_);
  EXPECT_FALSE(decision.enabled);
  EXPECT_NE(decision.reason.find("offers [hugetlb], not memory, pids"), std::string::npos)
      << decision.reason;
  EXPECT_FALSE(DecideCgroups(dir_ + "/missing").enabled);
}

TEST_F(CgroupTest, OfferedControllersAreEnabledForChildren) {
  Write("cgroup.controllers", "cpu memory pids\n");
  Write("cgroup.subtree_control", "cpu\n");
  const CgroupDecision decision = DecideCgroups(dir_);
  ASSERT_TRUE(decision.enabled) << decision.reason;
  EXPECT_EQ(decision.parent_dir, dir_);
  EXPECT_EQ(Read(dir_ + "/cgroup.subtree_control"), "+memory +pids");
}

// A cgroup that refuses to enable controllers (cgroup v2 refuses a cgroup holding processes,
// as a service manager's delegated one holds the node): the node moves itself into the leaf
// gshare-node and tries once more; where that fails too, the reason says so. (A directory stands
// for a subtree_control that refuses every write.)
TEST_F(CgroupTest, ARefusedEnableMovesTheNodeIntoALeafAndTriesAgain) {
  Write("cgroup.controllers", "memory pids\n");
  std::filesystem::create_directory(dir_ + "/cgroup.subtree_control");
  const CgroupDecision decision = DecideCgroups(dir_);
  EXPECT_FALSE(decision.enabled);
  EXPECT_NE(decision.reason.find("cgroup.subtree_control"), std::string::npos) << decision.reason;
  EXPECT_EQ(Read(dir_ + "/gshare-node/cgroup.procs"), std::to_string(::getpid()));
}

TEST_F(CgroupTest, AlreadyEnabledIsLeftAlone) {
  Write("cgroup.controllers", "memory pids\n");
  Write("cgroup.subtree_control", "memory pids\n");
  ASSERT_TRUE(DecideCgroups(dir_).enabled);
  EXPECT_EQ(Read(dir_ + "/cgroup.subtree_control"), "memory pids\n");
}

TEST_F(CgroupTest, InstanceCgroupSetsLimitsAndTheChildJoinsIt) {
  auto cgroup =
      InstanceCgroup::Create(dir_, "fn-echo-0", {.memory_max_bytes = 1u << 30, .pids_max = 64});
  ASSERT_TRUE(cgroup.ok()) << cgroup.status().ToString();
  EXPECT_EQ(Read((*cgroup)->dir() + "/memory.max"), "1073741824");
  EXPECT_EQ(Read((*cgroup)->dir() + "/pids.max"), "64");
  Write("fn-echo-0/cgroup.procs", "");

  boost::asio::io_context io;
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  spec.cgroup_procs_path = (*cgroup)->procs_path();
  auto child = ChildProcess::Spawn(io, spec);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  bool exited = false;
  (*child)->OnExit([&](int) { exited = true; });
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!exited && std::chrono::steady_clock::now() < guard) {
    io.run_one_for(std::chrono::milliseconds(500));
  }
  EXPECT_TRUE(exited);
  EXPECT_EQ(Read((*cgroup)->procs_path()), "0");  // the child wrote "0": it moved itself

  EXPECT_FALSE(InstanceCgroup::Create(dir_, "../escape", {}).ok());
  EXPECT_FALSE(InstanceCgroup::Create(dir_, "fn-echo-0", {}).ok());  // exists
  // The kernel's files vanish with the cgroup; the fake ones are removed by hand.
  for (const char* name : {"memory.max", "pids.max", "cgroup.procs"}) {
    std::filesystem::remove((*cgroup)->dir() + "/" + name);
  }
  const std::string instance_dir = (*cgroup)->dir();
  cgroup->reset();
  EXPECT_FALSE(std::filesystem::exists(instance_dir));
}

TEST(CgroupHostTest, ThisProcessGetsADecisionWithAReason) {
  const CgroupDecision decision = DecideCgroupsForThisProcess();
  EXPECT_FALSE(decision.reason.empty());
  std::printf("cgroup decision on this host: %s\n", decision.reason.c_str());
}

}  // namespace
}  // namespace gshare
