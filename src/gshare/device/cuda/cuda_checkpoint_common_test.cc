// The driver-independent parts of the process checkpoint API, and what opening it says on any
// machine (here: with or without a driver, with or without CUDA built).
#include <gtest/gtest.h>

#include "gshare/device/cuda/cuda_checkpoint.h"

namespace gshare {
namespace {

TEST(GpuUuidTest, ParsesACudaGpusUuidIntoItsBytesInOrder) {
  auto uuid = ParseGpuUuid("GPU-5f0c1e2d-3a4b-6c7d-8e9f-a0b1c2d3e4f5");
  ASSERT_TRUE(uuid.ok()) << uuid.status().ToString();
  const GpuUuidBytes expected = {0x5f, 0x0c, 0x1e, 0x2d, 0x3a, 0x4b, 0x6c, 0x7d,
                                 0x8e, 0x9f, 0xa0, 0xb1, 0xc2, 0xd3, 0xe4, 0xf5};
  EXPECT_EQ(*uuid, expected);
  auto upper = ParseGpuUuid("GPU-5F0C1E2D3A4B6C7D8E9FA0B1C2D3E4F5");
  ASSERT_TRUE(upper.ok());
  EXPECT_EQ(*upper, expected);
}

TEST(GpuUuidTest, RefusesWhatIsNotACudaGpusUuid) {
  for (const char* bad :
       {"", "GPU-", "EMU-00000000-0000-0000-0000-000000000000", "FAKE-0",
        "MIG-5f0c1e2d-3a4b-6c7d-8e9f-a0b1c2d3e4f5", "GPU-5f0c1e2d-3a4b-6c7d-8e9f-a0b1c2d3e4f",
        "GPU-5f0c1e2d-3a4b-6c7d-8e9f-a0b1c2d3e4f5a", "GPU-5f0c1e2d-3a4b-6c7d-8e9f-a0b1c2d3e4fg"}) {
    EXPECT_EQ(ParseGpuUuid(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

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
  EXPECT_TRUE(probe.starts_with("supported (") || probe.starts_with("unsupported: ")) << probe;
}

}  // namespace
}  // namespace gshare
