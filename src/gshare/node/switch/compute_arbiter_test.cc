#include "gshare/node/switch/compute_arbiter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gshare {
namespace {

struct Recorder final : ComputeArbiter::Client {
  Recorder(std::string client_name, std::vector<std::string>& grants)
      : name(std::move(client_name)), log(grants) {}
  virtual ~Recorder() = default;
  void GrantCompute(Duration quantum) override {
    log.push_back(name + "@" + std::to_string(quantum.count()));
  }
  std::string name;
  std::vector<std::string>& log;
};

TEST(ComputeArbiterTest, GrantsOneAtATimeRoundRobin) {
  std::vector<std::string> log;
  Recorder a("a", log), b("b", log), c("c", log);
  ComputeArbiter gpu(std::chrono::milliseconds(20));
  const std::string q = "@" + std::to_string(Duration(std::chrono::milliseconds(20)).count());

  gpu.Acquire(&a);
  gpu.Acquire(&b);
  gpu.Acquire(&b);  // asking twice is asking once
  gpu.Acquire(&c);
  EXPECT_EQ(log, std::vector<std::string>({"a" + q}));
  EXPECT_EQ(gpu.holder(), &a);
  EXPECT_EQ(gpu.waiting(), 2u);

  gpu.Release(&b);  // not the holder: ignored
  EXPECT_EQ(gpu.holder(), &a);
  gpu.Release(&a);
  gpu.Acquire(&a);  // wants more: the back of the line
  gpu.Release(&b);
  gpu.Release(&c);
  gpu.Release(&a);
  EXPECT_EQ(log, std::vector<std::string>({"a" + q, "b" + q, "c" + q, "a" + q}));
  EXPECT_EQ(gpu.holder(), nullptr);
  EXPECT_EQ(gpu.grants(), 4u);
}

TEST(ComputeArbiterTest, WithdrawingTheHolderOrAWaiterPassesTheEngineOn) {
  std::vector<std::string> log;
  Recorder a("a", log), b("b", log), c("c", log);
  ComputeArbiter gpu;
  gpu.Acquire(&a);
  gpu.Acquire(&b);
  gpu.Acquire(&c);
  gpu.Withdraw(&b);  // a waiter locked away
  gpu.Withdraw(&a);  // the holder crashed
  EXPECT_EQ(gpu.holder(), &c);
  EXPECT_EQ(gpu.waiting(), 0u);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].substr(0, 1), "c");
}

}  // namespace
}  // namespace gshare
