#include "gshare/common/fair_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gshare {
namespace {

std::vector<std::string> Drain(FairQueue<std::string>& queue) {
  std::vector<std::string> order;
  while (auto item = queue.Pop()) order.push_back(*item);
  return order;
}

TEST(FairQueueTest, OwnersTakeTurnsWhateverTheirBacklog) {
  FairQueue<std::string> queue;
  for (int i = 0; i < 4; ++i) queue.Push("a", "a" + std::to_string(i));
  queue.Push("b", "b0");
  queue.Push("c", "c0");
  queue.Push("b", "b1");
  EXPECT_EQ(queue.size(), 7u);
  EXPECT_EQ(queue.size("a"), 4u);
  EXPECT_EQ(Drain(queue), (std::vector<std::string>{"a0", "b0", "c0", "a1", "b1", "a2", "a3"}));
  EXPECT_TRUE(queue.empty());
  EXPECT_FALSE(queue.Pop().has_value());
}

TEST(FairQueueTest, AnOwnerThatComesBackWaitsForItsTurn) {
  FairQueue<std::string> queue;
  queue.Push("a", "a0");
  queue.Push("a", "a1");
  EXPECT_EQ(*queue.Pop(), "a0");
  queue.Push("b", "b0");
  EXPECT_EQ(*queue.Pop(), "a1");  // a's turn came first
  queue.Push("a", "a2");
  EXPECT_EQ(Drain(queue), (std::vector<std::string>{"b0", "a2"}));
}

TEST(FairQueueTest, TakeAllEmptiesIt) {
  FairQueue<std::string> queue;
  queue.Push("b", "b0");
  queue.Push("a", "a0");
  queue.Push("b", "b1");
  EXPECT_EQ(queue.TakeAll(), (std::vector<std::string>{"a0", "b0", "b1"}));
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.size("b"), 0u);
}

}  // namespace
}  // namespace gshare
