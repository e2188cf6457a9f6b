#include "gshare/common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace gshare {

bool SetLogLevel(const std::string& level) {
  static const bool installed = [] {
    auto logger = spdlog::stderr_color_mt("gshare");
    logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    spdlog::set_default_logger(logger);
    return true;
  }();
  (void)installed;
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    spdlog::set_level(spdlog::level::info);
    return false;
  }
  spdlog::set_level(parsed);
  return true;
}

}  // namespace gshare
