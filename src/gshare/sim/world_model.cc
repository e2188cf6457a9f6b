#include "gshare/sim/world_model.h"

#include <fmt/format.h>

namespace gshare {

WorldModel WorldModel::Fair() {
  WorldModel world;
  world.gpus_per_node = 8;
  world.host_bytes_per_second = 50e9;
  world.restore_noise.sigma = 0.1;
  world.prior_error = 0.3;
  world.fragmentation = true;
  return world;
}

std::string WorldModel::Describe() const {
  if (ideal()) return "ideal";
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ",") + part; };
  if (gpus_per_node > 0) add(fmt::format("gpus-per-node={}", gpus_per_node));
  if (host_bytes_per_second > 0) {
    add(fmt::format("host-bandwidth={:g}GB/s", host_bytes_per_second / 1e9));
  }
  if (!restore_noise.none()) add("restore-noise=" + FormatExecNoise(restore_noise));
  if (prior_error > 0) add(fmt::format("prior-error={}", prior_error));
  if (fragmentation) add("fragmentation");
  return out;
}

}  // namespace gshare
