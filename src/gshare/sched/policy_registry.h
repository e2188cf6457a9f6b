// The policies `gshare sim --policy` knows, by name.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/sched/policy_options.h"
#include "gshare/sched/scheduler.h"

namespace gshare {

// Names accepted by MakePolicy, in the order reports list them.
const std::vector<std::string_view>& PolicyNames();

// A new scheduler of policy `name` over `context`. NotFound for an unknown name (the message
// lists the known ones).
Result<std::unique_ptr<Scheduler>> MakePolicy(std::string_view name,
                                              const SchedulerContext& context,
                                              const PolicyOptions& options);

}  // namespace gshare
