#include "gshare/serve/deployer.h"

namespace gshare::serve {

std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnavailable:
      return "UNAVAILABLE";
  }
  return "UNAVAILABLE";
}

}  // namespace gshare::serve
