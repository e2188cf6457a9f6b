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

// With fixed numbers (the server's registry), a tenant's uid does not depend on the order tenants
// are seen in, so it is the same in every run; a number beyond the range and a lookup that fails
// are errors.
TEST(TenantIdentitiesTest, FixedNumbersGiveTheSameUidWhateverTheOrder) {
  const auto number_of = [](const std::string& tenant) -> Result<std::uint32_t> {
    if (tenant == "alice") return 7u;
    if (tenant == "bob") return 3u;
    if (tenant == "huge") return 10u;
    return NotFound("no tenant " + tenant);
  };
  auto ids = TenantIdentities::Create({.base_uid = 70000, .count = 10, .number_of = number_of}, 0);
  ASSERT_TRUE(ids.ok());
  auto b = ids->ForTenant("bob");
  auto a = ids->ForTenant("alice");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->uid, 70007u);
  EXPECT_EQ((*b)->uid, 70003u);
  EXPECT_EQ(ids->ForTenant("huge").status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ids->ForTenant("nobody").status().code(), StatusCode::kNotFound);
}

// The number is asked at every call: a tenant removed and added again under its name (a new
// number) runs as its new uid, never as the old tenant's.
TEST(TenantIdentitiesTest, ATenantAddedAgainGetsItsNewNumbersUid) {
  std::uint32_t number = 4;
  auto ids = TenantIdentities::Create(
      {.base_uid = 70000,
       .count = 10,
       .number_of = [&](const std::string&) -> Result<std::uint32_t> { return number; }},
      0);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids->ForTenant("acme"))->uid, 70004u);
  number = 9;
  EXPECT_EQ((*ids->ForTenant("acme"))->uid, 70009u);
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
