#include "gshare/common/fair_share.h"

#include <algorithm>

namespace gshare {

bool FairShare::TryAcquire(const std::string& tenant, std::uint64_t amount) {
  MutexLock lock(mutex_);
  const auto mine = held_.find(tenant);
  const std::uint64_t held = mine == held_.end() ? 0 : mine->second;
  const std::uint64_t active = held_.size() + (mine == held_.end() ? 1 : 0);
  const std::uint64_t share = capacity_ / active;
  bool granted = amount <= share && held <= share - amount && total_ + amount <= 2 * capacity_;
  if (!granted) {
    // Borrow only what no other active tenant's share still needs.
    std::uint64_t reserved = 0;
    for (const auto& [other, other_held] : held_) {
      if (other != tenant && other_held < share) reserved += share - other_held;
    }
    const std::uint64_t committed = total_ + reserved;
    granted = committed <= capacity_ && amount <= capacity_ - committed;
  }
  if (!granted) return false;
  if (amount == 0) return true;
  held_[tenant] = held + amount;
  total_ += amount;
  return true;
}

void FairShare::Release(const std::string& tenant, std::uint64_t amount) {
  MutexLock lock(mutex_);
  const auto it = held_.find(tenant);
  if (it == held_.end()) return;
  const std::uint64_t given = std::min(amount, it->second);
  it->second -= given;
  total_ -= given;
  if (it->second == 0) held_.erase(it);
}

std::uint64_t FairShare::held() const {
  MutexLock lock(mutex_);
  return total_;
}

std::uint64_t FairShare::held_by(const std::string& tenant) const {
  MutexLock lock(mutex_);
  const auto it = held_.find(tenant);
  return it == held_.end() ? 0 : it->second;
}

}  // namespace gshare
