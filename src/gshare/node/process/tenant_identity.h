// TenantIdentities: the uid/gid each tenant's function processes run as.
//
// When the node runs as root, each tenant gets a distinct unprivileged uid (gid equal), allocated
// from [base_uid, base_uid + count) in order of first use and stable for the life of the object
// (one node run). Otherwise, or with switch_uid false, every function runs as the node's own uid:
// the same-uid fallback, in which tenants are separated by dumpable 0, limits and cgroups only,
// not by uid; the constructor logs which mode is in force, once. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "gshare/common/status.h"
#include "gshare/node/process/process_spec.h"

namespace gshare {

struct TenantIdentityOptions {
  uid_t base_uid = 70000;
  std::uint32_t count = 10000;
  bool switch_uid = true;  // false: the same-uid fallback even as root
  // A tenant's fixed number (below `count`): its uid is base_uid + the number, the same in every
  // run of the node; asked at every ForTenant, so a tenant removed and added again under the same
  // name gets its new number's uid. Unset: numbers in the order tenants are first seen in this
  // run.
  std::function<Result<std::uint32_t>(const std::string&)> number_of{};
};

class TenantIdentities {
 public:
  // `effective_uid` is geteuid() in the node; tests pass another value.
  static Result<TenantIdentities> Create(TenantIdentityOptions options, uid_t effective_uid);

  bool switches_uid() const { return switches_uid_; }
  // One line saying which mode is in force and why.
  const std::string& mode() const { return mode_; }

  // The identity for `tenant`'s processes, or nullopt in the same-uid fallback.
  // kResourceExhausted when every uid of the range is taken.
  Result<std::optional<ProcessIdentity>> ForTenant(const std::string& tenant);

 private:
  TenantIdentities(TenantIdentityOptions options, bool switches_uid, std::string mode);

  TenantIdentityOptions options_;
  bool switches_uid_;
  std::string mode_;
  std::map<std::string, uid_t> assigned_;
};

}  // namespace gshare
