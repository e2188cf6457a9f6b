// ForTenant: a node's error message as a tenant may read it. The node's own messages (an instance
// that ended, a health check that failed, a crash loop) name instance ids, host pids and the
// node's paths, which are for the operator's log; the tenant gets the same sentence without them:
// "instance 7 of echo (pid 4242) exited with status 3" becomes "an instance of echo exited with
// status 3", and an absolute path outside `models` (the tenant's model folder) becomes "(a node
// path)" while one inside it is given relative to it. Free function, no state: any thread.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare::serve {

std::string ForTenant(std::string_view message, const std::filesystem::path& models);
// The status with its message ForTenant (OK stays OK).
Status ForTenant(const Status& status, const std::filesystem::path& models);

}  // namespace gshare::serve
