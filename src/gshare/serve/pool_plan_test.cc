#include "gshare/serve/pool_plan.h"

#include <gtest/gtest.h>

#include "gshare/common/units.h"

namespace gshare::serve {
namespace {

PoolClaim Claim(std::string tenant, std::string name, std::uint64_t bytes, std::int64_t created,
                std::int64_t changed = -1) {
  return {.tenant = std::move(tenant),
          .name = std::move(name),
          .bytes = bytes,
          .created_ms = created,
          .changed_ms = changed < 0 ? created : changed};
}

TEST(PoolPlanTest, ALoneTenantMayFillThePool) {
  const PoolPlan plan = PlanSnapshotPool(
      4 * kGiB, {Claim("a", "f1", kGiB, 1), Claim("a", "f2", kGiB, 2), Claim("a", "f3", kGiB, 3),
                 Claim("a", "f4", kGiB, 4), Claim("a", "f5", kGiB, 5)});
  EXPECT_EQ(plan.tenants, 1u);
  EXPECT_EQ(plan.share_bytes, 4 * kGiB);
  EXPECT_EQ(plan.warm.size(), 4u);
  EXPECT_TRUE(plan.Warm("a", "f4"));
  EXPECT_FALSE(plan.Warm("a", "f5"));  // no room at all
  EXPECT_EQ(plan.warm_bytes, 4 * kGiB);
}

TEST(PoolPlanTest, ANewcomersFirstFunctionTakesItsShareBackFromTheLastBorrowed) {
  std::vector<PoolClaim> claims = {Claim("a", "f1", kGiB, 1), Claim("a", "f2", kGiB, 2),
                                   Claim("a", "f3", kGiB, 3), Claim("a", "f4", kGiB, 4)};
  EXPECT_EQ(PlanSnapshotPool(4 * kGiB, claims).warm.size(), 4u);
  claims.push_back(Claim("b", "g1", kGiB, 5));
  const PoolPlan plan = PlanSnapshotPool(4 * kGiB, claims);
  EXPECT_EQ(plan.share_bytes, 2 * kGiB);
  EXPECT_TRUE(plan.Warm("b", "g1"));
  EXPECT_TRUE(plan.Warm("a", "f1"));
  EXPECT_TRUE(plan.Warm("a", "f2"));
  EXPECT_TRUE(plan.Warm("a", "f3"));   // borrowed, changed before f4
  EXPECT_FALSE(plan.Warm("a", "f4"));  // borrowed last: taken back first
  EXPECT_EQ(plan.HeldBy("a").within_share, 2 * kGiB);
  EXPECT_EQ(plan.HeldBy("a").borrowed, kGiB);
  EXPECT_EQ(plan.HeldBy("b").within_share, kGiB);
  // The newcomer's second function takes the rest of its share: a's last loan goes too.
  claims.push_back(Claim("b", "g2", kGiB, 6));
  const PoolPlan full = PlanSnapshotPool(4 * kGiB, claims);
  EXPECT_TRUE(full.Warm("b", "g2"));
  EXPECT_FALSE(full.Warm("a", "f3"));
  EXPECT_EQ(full.HeldBy("a").borrowed, 0u);
  // Beyond its own share the newcomer borrows only what is left: nothing.
  claims.push_back(Claim("b", "g3", kGiB, 7));
  EXPECT_FALSE(PlanSnapshotPool(4 * kGiB, claims).Warm("b", "g3"));
  // Once it is gone, a's functions are warm again.
  claims.erase(claims.begin() + 4, claims.end());
  EXPECT_EQ(PlanSnapshotPool(4 * kGiB, claims).warm.size(), 4u);
}

TEST(PoolPlanTest, AFunctionChangedLastIsTheFirstLoanTakenBack) {
  // f1 is older than f3 but was changed after it: of a's loans it goes first.
  const PoolPlan plan =
      PlanSnapshotPool(4 * kGiB, {Claim("a", "f0", 2 * kGiB, 0), Claim("a", "f1", kGiB, 1, 10),
                                  Claim("a", "f3", kGiB, 3), Claim("b", "g1", 2 * kGiB, 5)});
  EXPECT_TRUE(plan.Warm("a", "f0"));
  EXPECT_TRUE(plan.Warm("b", "g1"));
  EXPECT_FALSE(plan.Warm("a", "f1"));
  EXPECT_FALSE(plan.Warm("a", "f3"));  // no room left: both loans are taken back
  const PoolPlan roomier =
      PlanSnapshotPool(5 * kGiB, {Claim("a", "f0", 2 * kGiB, 0), Claim("a", "f1", kGiB, 1, 10),
                                  Claim("a", "f3", kGiB, 3), Claim("b", "g1", 2 * kGiB, 5)});
  EXPECT_TRUE(roomier.Warm("a", "f3"));
  EXPECT_FALSE(roomier.Warm("a", "f1"));
}

TEST(PoolPlanTest, ASharesRoomGoesToASmallerLaterFunctionWhenALargerOneDoesNotFit) {
  const PoolPlan plan = PlanSnapshotPool(
      4 * kGiB,
      {Claim("a", "big", 3 * kGiB, 1), Claim("a", "small", kGiB, 2), Claim("b", "g", 2 * kGiB, 3)});
  EXPECT_EQ(plan.share_bytes, 2 * kGiB);
  EXPECT_TRUE(plan.Warm("a", "small"));  // within a's share
  EXPECT_TRUE(plan.Warm("b", "g"));
  EXPECT_FALSE(plan.Warm("a", "big"));  // larger than a share and than what is left
  EXPECT_EQ(plan.warm_bytes, 3 * kGiB);
}

TEST(PoolPlanTest, EveryTenantWithinItsShareIsWarmWhateverTheOrder) {
  std::vector<PoolClaim> claims;
  for (int i = 0; i < 6; ++i) claims.push_back(Claim("a", "f" + std::to_string(i), kGiB, i));
  claims.push_back(Claim("b", "g", kGiB, 100));
  claims.push_back(Claim("c", "h", 2 * kGiB, 200));
  const PoolPlan plan = PlanSnapshotPool(6 * kGiB, claims);
  EXPECT_EQ(plan.share_bytes, 2 * kGiB);
  EXPECT_TRUE(plan.Warm("b", "g"));
  EXPECT_TRUE(plan.Warm("c", "h"));
  EXPECT_EQ(plan.HeldBy("a").within_share + plan.HeldBy("a").borrowed, 3 * kGiB);
  EXPECT_LE(plan.warm_bytes, 6 * kGiB);
}

TEST(PoolPlanTest, NoPoolPlansNothing) {
  const PoolPlan plan = PlanSnapshotPool(0, {Claim("a", "f", kGiB, 1), Claim("b", "g", kGiB, 2)});
  EXPECT_EQ(plan.warm.size(), 2u);
}

}  // namespace
}  // namespace gshare::serve
