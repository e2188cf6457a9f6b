// Logging: spdlog, to standard error, set up once by the command line.
#pragma once

#include <spdlog/spdlog.h>

namespace gshare {

// Sets the process-wide log level from "trace", "debug", "info", "warn", "error" or "off".
// Unknown names leave the level at info and return false.
bool SetLogLevel(const std::string& level);

}  // namespace gshare
