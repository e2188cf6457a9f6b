#include "gshare/node/process/tenant_identity.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(TenantIdentitiesTest, DistinctStableUidsPerTenantAsRoot) {
  auto ids = TenantIdentities::Create({.base_uid = 70000, .count = 2}, /*effective_uid=*/0);
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids->switches_uid());
  auto a = ids->ForTenant("alice");
  auto b = ids->ForTenant("bob");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->has_value() && b->has_value());
  EXPECT_EQ((*a)->uid, 70000u);
  EXPECT_EQ((*a)->gid, 70000u);
  EXPECT_EQ((*b)->uid, 70001u);
  auto again = ids->ForTenant("alice");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->uid, 70000u);
  auto third = ids->ForTenant("carol");
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
}

TEST(TenantIdentitiesTest, SameUidFallbackWhenNotRootOrTurnedOff) {
  auto not_root = TenantIdentities::Create({}, /*effective_uid=*/1000);
  ASSERT_TRUE(not_root.ok());
  EXPECT_FALSE(not_root->switches_uid());
  EXPECT_NE(not_root->mode().find("not root"), std::string::npos);
  auto identity = not_root->ForTenant("alice");
  ASSERT_TRUE(identity.ok());
  EXPECT_FALSE(identity->has_value());

  auto off = TenantIdentities::Create({.switch_uid = false}, 0);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->switches_uid());
  EXPECT_NE(off->mode().find("turned off"), std::string::npos);
}

TEST(TenantIdentitiesTest, RejectsBadRanges) {
  EXPECT_FALSE(TenantIdentities::Create({.base_uid = 0}, 0).ok());
  EXPECT_FALSE(TenantIdentities::Create({.count = 0}, 0).ok());
  EXPECT_FALSE(TenantIdentities::Create({.base_uid = 4294967000u, .count = 1000}, 0).ok());
}

}  // namespace
}  // namespace gshare
