// The driver-independent parts of the process checkpoint API, and what opening it says on any
// machine (here: with or without a driver, with or without CUDA built).
#include <gtest/gtest.h>

#include "gshare/device/cuda/cuda_checkpoint.h"

namespace gshare {
namespace {

TEST(ProcessCheckpointApiTest, NamesEveryState) {
  EXPECT_EQ(ProcessCheckpointStateName(ProcessCheckpointState::kRunning), "running");
  EXPECT_EQ(ProcessCheckpointStateName(ProcessCheckpointState::kLocked), "locked");
  EXPECT_EQ(ProcessCheckpointStateName(ProcessCheckpointState::kCheckpointed), "checkpointed");
  EXPECT_EQ(ProcessCheckpointStateName(ProcessCheckpointState::kFailed), "failed");
}

TEST(ProcessCheckpointApiTest, OpensOrSaysWhyNotAndTheProbeAgrees) {
  auto api = OpenProcessCheckpointApi();
  const std::string probe = ProbeProcessCheckpointApi();
  if (!api.ok()) {
    // No driver, a driver without the API, or a build without CUDA: said plainly.
    EXPECT_EQ(api.status().code(), StatusCode::kUnavailable) << api.status().ToString();
    EXPECT_FALSE(api.status().message().empty());
    EXPECT_EQ(probe, "unsupported: " + api.status().message());
    return;
  }
  // "unknown: " where the driver did not answer about this process within the probe's bound.
  EXPECT_TRUE(probe.starts_with("supported (") || probe.starts_with("unsupported: ") ||
              probe.starts_with("unknown: "))
      << probe;
}

}  // namespace
}  // namespace gshare
