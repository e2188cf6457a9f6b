// PolicyOptions: the knobs of the scheduling policies, with their defaults and reasons.
#pragma once

#include <chrono>

#include "gshare/common/units.h"

namespace gshare {

struct PolicyOptions {
  // How long an idle GPU (a keepalive instance, an idle faaswap pool GPU) is kept before it is
  // released. 15 minutes: the keep-alive window of common FaaS platforms and of the gShare
  // paper's keep-alive baseline.
  Duration keep_alive = std::chrono::minutes(15);
  // Time from asking for a new GPU (a function instance, a pool GPU) until it can take a restore:
  // VM or container start plus CUDA context creation. Not counting the model load, which the
  // simulator charges as a restore over the link.
  Duration instance_start = std::chrono::seconds(2);
  // faaswap: delay that the GPU proxy adds to each request before it reaches the GPU, as a
  // fraction of the function's batch-1 execution latency. gShare (ASPLOS'26) measures about 40%
  // more forwarding delay through such a proxy.
  double proxy_overhead_fraction = 0.40;
};

}  // namespace gshare
