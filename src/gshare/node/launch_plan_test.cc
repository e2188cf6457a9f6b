#include "gshare/node/launch_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gshare/model/catalog.h"

namespace gshare {
namespace {

TEST(LaunchPlanTest, ThePytorchRuntimeRunsTheTenantsFileUnderTheNodesPython) {
  auto spec = ParseFunctionEntry(
      "name: net\nmodel_size: 1Mi\ngpu_memory: 16Mi\nexec_latency: 5ms\nmax_batch: 4\n"
      "runtime: pytorch\nthreads: 2\nmodel_files: [/models/acme/net.pt]\n"
      "inputs: [{name: x, datatype: FP32, shape: [-1, 16]}, {name: '--m: a, b', datatype: INT64, "
      "shape: [-1]}]\noutputs: [{name: y, datatype: FP16, shape: [-1, 4]}]\n",
      "net.yaml", "acme");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto launch = PlanLaunch(*spec, BuiltinGpuTypes().front(),
                           {.function_program = "/opt/gshare/gshare-function",
                            .python = "/usr/bin/python3",
                            .min_instances = 1});
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_EQ(launch->command.argv,
            (std::vector<std::string>{
                "/usr/bin/python3", "/opt/gshare/python/gshare_runtime/pytorch_function.py",
                "--model-file", "/models/acme/net.pt", "--name", "net", "--max-batch", "4",
                "--threads", "2", "--device", "emulated", "--input", "FP32:-1,16:x", "--input",
                "INT64:-1:--m: a, b", "--output", "FP16:-1,4:y"}));
  EXPECT_FALSE(launch->command.read_metadata);  // the spec's tensors are the model's
  EXPECT_TRUE(launch->command.batched);
  EXPECT_EQ(launch->mechanism, SwitchMechanism::kShim);

  // On CUDA GPUs the model runs on the process's own device; the spec's switch travels along.
  auto on_cuda = *spec;
  on_cuda.switch_mechanism = SwitchMechanism::kCheckpoint;
  auto cuda = PlanLaunch(on_cuda, BuiltinGpuTypes().front(),
                         {.function_program = "/opt/gshare/gshare-function",
                          .python = "/usr/bin/python3",
                          .cuda_gpus = true,
                          .min_instances = 1});
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  const auto& argv = cuda->command.argv;
  const auto device = std::find(argv.begin(), argv.end(), "--device");
  ASSERT_NE(device, argv.end());
  ASSERT_NE(device + 1, argv.end());
  EXPECT_EQ(*(device + 1), "cuda");
  EXPECT_EQ(cuda->mechanism, SwitchMechanism::kCheckpoint);
}

}  // namespace
}  // namespace gshare
