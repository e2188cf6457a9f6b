#include "gshare/node/process/instance_environment.h"

#include <fmt/format.h>

#include "gshare/fn/control_channel.h"

namespace gshare {

std::vector<std::pair<std::string, std::string>> InstanceEnvironment(
    const InstanceChannel& channel, const std::map<std::string, std::string>& command_env) {
  std::vector<std::pair<std::string, std::string>> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  if (channel.control) {
    env.emplace_back(fn::kControlFdEnv, "3");
    env.emplace_back(fn::kDeviceBaseEnv, fmt::format("{:#x}", channel.device_base));
    env.emplace_back(fn::kDeviceReserveEnv, std::to_string(channel.device_reserve_bytes));
  }
  if (!channel.socket_path.empty()) env.emplace_back("GSHARE_SOCKET", channel.socket_path);
  env.emplace_back("OPENBLAS_NUM_THREADS", "1");
  for (const auto& [name, value] : command_env) env.emplace_back(name, value);
  return env;
}

}  // namespace gshare
