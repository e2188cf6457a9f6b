// PlanSnapshotPool: which deployed functions keep a warm instance in the node's snapshot pool.
//
// Every deployed function would like to keep one instance in host memory (its memory image in the
// pinned snapshot pool), so that its next request restores instead of starting a process. The
// pool is shared fairly among the tenants that have functions, work-conserving:
//  - each of the n tenants with functions is guaranteed pool / n: its functions, oldest first,
//    are kept warm while they fit in that share (a function that does not fit is skipped, and a
//    later smaller one may still fit);
//  - what the guaranteed parts leave is lent to the rest, the least recently changed first, each
//    kept warm when it fits in what is left;
//  - a function kept warm on neither count is cold: it keeps no instance while it has no work.
// So a lone tenant may fill the pool, and a tenant that deploys its first function takes its
// share back from the borrowers at once: their most recently changed borrowed functions go cold
// first. The plan is a function of the registry alone (no state), so a restarted server plans
// what the one before it did.
//
// Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gshare::serve {

// One deployed function as the plan sees it.
struct PoolClaim {
  std::string tenant;
  std::string name;
  std::uint64_t bytes = 0;      // its warm instance's image: max(gpu_memory, model_size)
  std::int64_t created_ms = 0;  // order within the guaranteed share (oldest first)
  std::int64_t changed_ms = 0;  // order among the borrowers (least recently changed first)
};

using FunctionKey = std::pair<std::string, std::string>;  // (tenant, name)

struct PoolPlan {
  std::uint64_t pool_bytes = 0;
  std::size_t tenants = 0;        // tenants with functions
  std::uint64_t share_bytes = 0;  // pool_bytes / tenants (the whole pool when there are none)
  std::set<FunctionKey> warm;     // the functions kept warm
  std::set<FunctionKey> cold;     // the other claims
  std::uint64_t warm_bytes = 0;   // their bytes, at most pool_bytes
  // Bytes each tenant keeps warm within its share, and beyond it (borrowed).
  struct Held {
    std::uint64_t within_share = 0;
    std::uint64_t borrowed = 0;
  };
  std::vector<std::pair<std::string, Held>> held;  // by tenant name

  bool Warm(const std::string& tenant, const std::string& name) const {
    return warm.contains(FunctionKey(tenant, name));
  }
  Held HeldBy(const std::string& tenant) const;
};

// The plan of `pool_bytes` for `claims` (one per function; ties in order broken by tenant and
// name). A pool of 0 bytes is not planned: every claim is warm.
PoolPlan PlanSnapshotPool(std::uint64_t pool_bytes, std::vector<PoolClaim> claims);

}  // namespace gshare::serve
