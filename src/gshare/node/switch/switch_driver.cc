#include "gshare/node/switch/switch_driver.h"

namespace gshare {

std::string_view SwitchStateName(SwitchState state) {
  switch (state) {
    case SwitchState::kStarting:
      return "starting";
    case SwitchState::kMapping:
      return "mapping";
    case SwitchState::kResident:
      return "resident";
    case SwitchState::kLocking:
      return "locking";
    case SwitchState::kCheckpointing:
      return "checkpointing";
    case SwitchState::kUnmapping:
      return "unmapping";
    case SwitchState::kCheckpointed:
      return "checkpointed";
    case SwitchState::kRestoring:
      return "restoring";
    case SwitchState::kFailed:
      return "failed";
  }
  return "unknown";
}

}  // namespace gshare
