// PolicyParamName: a GoogleTest parameter name for a policy ("gshare-no-lazy" becomes
// "gshare_no_lazy"), for suites instantiated over PolicyNames().
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace gshare::testing {

inline std::string PolicyParamName(const ::testing::TestParamInfo<std::string_view>& param) {
  std::string name(param.param);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

}  // namespace gshare::testing
