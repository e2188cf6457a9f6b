#include "gshare/node/process/tenant_identity.h"

#include <limits>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gshare {

Result<TenantIdentities> TenantIdentities::Create(TenantIdentityOptions options,
                                                  uid_t effective_uid) {
  if (options.base_uid == 0 || options.count == 0 ||
      static_cast<std::uint64_t>(options.base_uid) + options.count >
          std::numeric_limits<uid_t>::max()) {
    return InvalidArgument(fmt::format(
        "tenant uid range [{}, {}+{}) must be non-empty, above 0 and "
        "below {}",
        options.base_uid, options.base_uid, options.count, std::numeric_limits<uid_t>::max()));
  }
  std::string mode;
  bool switches = false;
  if (!options.switch_uid) {
    mode = fmt::format(
        "function processes run as the node's uid {} (uid switching turned off): "
        "tenants are not separated by uid",
        effective_uid);
  } else if (effective_uid != 0) {
    mode = fmt::format(
        "function processes run as the node's uid {} (the node is not root, so it "
        "cannot switch uid): tenants are not separated by uid",
        effective_uid);
  } else {
    switches = true;
    mode = fmt::format("function processes run as one uid per tenant from {} to {}",
                       options.base_uid, options.base_uid + options.count - 1);
  }
  spdlog::info("{}", mode);
  return TenantIdentities(options, switches, std::move(mode));
}

TenantIdentities::TenantIdentities(TenantIdentityOptions options, bool switches_uid,
                                   std::string mode)
    : options_(options), switches_uid_(switches_uid), mode_(std::move(mode)) {}

Result<std::optional<ProcessIdentity>> TenantIdentities::ForTenant(const std::string& tenant) {
  if (!switches_uid_) return std::optional<ProcessIdentity>();
  if (options_.number_of) {
    // Asked every time: a tenant removed and added again under its name has a new number.
    GSHARE_ASSIGN_OR_RETURN(const std::uint32_t number, options_.number_of(tenant));
    if (number >= options_.count) {
      return ResourceExhausted(fmt::format("tenant '{}' has number {}, beyond the {} uids from {}",
                                           tenant, number, options_.count, options_.base_uid));
    }
    const auto uid = static_cast<uid_t>(options_.base_uid + number);
    return std::optional<ProcessIdentity>(ProcessIdentity{uid, uid});
  }
  auto it = assigned_.find(tenant);
  if (it == assigned_.end()) {
    if (assigned_.size() >= options_.count) {
      return ResourceExhausted(
          fmt::format("no uid left for tenant '{}': all {} uids from {} are "
                      "assigned",
                      tenant, options_.count, options_.base_uid));
    }
    const auto uid = static_cast<uid_t>(options_.base_uid + assigned_.size());
    it = assigned_.emplace(tenant, uid).first;
  }
  return std::optional<ProcessIdentity>(ProcessIdentity{it->second, it->second});
}

}  // namespace gshare
