#include "gshare/serve/pool_plan.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gshare::serve {

PoolPlan::Held PoolPlan::HeldBy(const std::string& tenant) const {
  for (const auto& [name, held_by] : held) {
    if (name == tenant) return held_by;
  }
  return {};
}

PoolPlan PlanSnapshotPool(std::uint64_t pool_bytes, std::vector<PoolClaim> claims) {
  PoolPlan plan;
  plan.pool_bytes = pool_bytes;
  std::map<std::string, PoolPlan::Held> held;
  for (const PoolClaim& claim : claims) held.try_emplace(claim.tenant);
  plan.tenants = held.size();
  plan.share_bytes = plan.tenants == 0 ? pool_bytes : pool_bytes / plan.tenants;
  const auto keep = [&](const PoolClaim& claim) {
    plan.warm.emplace(claim.tenant, claim.name);
    plan.warm_bytes += claim.bytes;
  };
  if (pool_bytes == 0) {
    for (const PoolClaim& claim : claims) keep(claim);
    for (auto& [tenant, held_by] : held) plan.held.emplace_back(tenant, held_by);
    return plan;
  }

  // The guaranteed shares, each tenant's oldest functions first.
  std::sort(claims.begin(), claims.end(), [](const PoolClaim& a, const PoolClaim& b) {
    return std::tie(a.created_ms, a.tenant, a.name) < std::tie(b.created_ms, b.tenant, b.name);
  });
  std::vector<const PoolClaim*> borrowers;
  for (const PoolClaim& claim : claims) {
    PoolPlan::Held& mine = held[claim.tenant];
    if (claim.bytes <= plan.share_bytes - mine.within_share) {
      mine.within_share += claim.bytes;
      keep(claim);
    } else {
      borrowers.push_back(&claim);
    }
  }
  // What the shares leave, lent in the order of the last change: a function changed last is the
  // first whose loan is taken back.
  std::sort(borrowers.begin(), borrowers.end(), [](const PoolClaim* a, const PoolClaim* b) {
    return std::tie(a->changed_ms, a->tenant, a->name) <
           std::tie(b->changed_ms, b->tenant, b->name);
  });
  for (const PoolClaim* claim : borrowers) {
    if (claim->bytes > pool_bytes - plan.warm_bytes) {
      plan.cold.emplace(claim->tenant, claim->name);
      continue;
    }
    held[claim->tenant].borrowed += claim->bytes;
    keep(*claim);
  }
  for (auto& [tenant, held_by] : held) plan.held.emplace_back(tenant, held_by);
  return plan;
}

}  // namespace gshare::serve
