// The text of data/gpu-types.yaml, embedded into the binary at build time (see CMakeLists.txt).
#pragma once

#include <string_view>

namespace gshare {

std::string_view BuiltinGpuTypesYaml();

}  // namespace gshare
