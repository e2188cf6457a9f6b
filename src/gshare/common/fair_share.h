// FairShare: a bounded resource (requests in flight, bytes of bodies buffered) shared by tenants,
// work-conserving with a guaranteed equal share for each active tenant.
//
// A tenant is active while it holds some of the resource, and when it asks. With n active
// tenants each one's share is capacity / n. A request that keeps the tenant within its share is
// always granted; one beyond it borrows, and is granted only from what no active tenant's share
// still needs: the capacity less what is held and less the unused shares of the other active
// tenants. So a lone tenant may take the whole capacity, and a tenant that arrives while it does
// still gets its share at once; what the first one borrowed is reclaimed as it gives it back,
// since it cannot borrow again while the newcomer's share is unused. Holdings beyond the capacity
// are what newcomers were granted from their shares while borrowed amounts were still out; they
// are bounded too: nothing is granted that would take what is held past twice the capacity.
//
// Thread-safe (an internal mutex). Hold is the RAII form: it gives back what it took.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "gshare/common/mutex.h"

namespace gshare {

class FairShare {
 public:
  explicit FairShare(std::uint64_t capacity) : capacity_(capacity) {}

  // Takes `amount` for `tenant`; false (nothing taken) when it is beyond the tenant's share and
  // more than it may borrow.
  bool TryAcquire(const std::string& tenant, std::uint64_t amount) EXCLUDES(mutex_);
  // Gives back `amount` that `tenant` took.
  void Release(const std::string& tenant, std::uint64_t amount) EXCLUDES(mutex_);

  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t held() const EXCLUDES(mutex_);
  std::uint64_t held_by(const std::string& tenant) const EXCLUDES(mutex_);

  // What one TryAcquire took, given back when the Hold goes. Movable, not copyable.
  class Hold {
   public:
    Hold() = default;
    Hold(FairShare* share, std::string tenant, std::uint64_t amount)
        : share_(share), tenant_(std::move(tenant)), amount_(amount) {}
    Hold(Hold&& other) noexcept { *this = std::move(other); }
    Hold& operator=(Hold&& other) noexcept {
      if (this != &other) {
        Reset();
        share_ = other.share_;
        tenant_ = std::move(other.tenant_);
        amount_ = other.amount_;
        other.share_ = nullptr;
      }
      return *this;
    }
    ~Hold() { Reset(); }
    void Reset() {
      if (share_ != nullptr) share_->Release(tenant_, amount_);
      share_ = nullptr;
    }

   private:
    FairShare* share_ = nullptr;
    std::string tenant_;
    std::uint64_t amount_ = 0;
  };
  // TryAcquire as a Hold; nothing when refused.
  std::optional<Hold> Take(const std::string& tenant, std::uint64_t amount) {
    if (!TryAcquire(tenant, amount)) return std::nullopt;
    return Hold(this, tenant, amount);
  }

 private:
  const std::uint64_t capacity_;
  mutable Mutex mutex_;
  std::map<std::string, std::uint64_t> held_ GUARDED_BY(mutex_);  // tenants holding some
  std::uint64_t total_ GUARDED_BY(mutex_) = 0;
};

}  // namespace gshare
