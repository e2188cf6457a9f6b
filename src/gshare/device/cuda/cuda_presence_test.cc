// The fallback decision of `--device auto`, over the runtime's answers. Runs without a GPU.
#include "gshare/device/cuda/cuda_presence.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

namespace gshare {
namespace {

TEST(CudaPresenceTest, GpusWhenTheRuntimeCountsSome) {
  EXPECT_EQ(ClassifyCudaPresence(cudaSuccess, 2, true), CudaPresence::kGpus);
  EXPECT_EQ(ClassifyCudaPresence(cudaSuccess, 0, true), CudaPresence::kNoGpu);
}

TEST(CudaPresenceTest, NoDriverOnlyWhenTheDriverCannotBeLoaded) {
  EXPECT_EQ(ClassifyCudaPresence(cudaErrorInsufficientDriver, 0, false), CudaPresence::kNoDriver);
  EXPECT_EQ(ClassifyCudaPresence(cudaErrorNoDevice, 0, false), CudaPresence::kNoDriver);
  EXPECT_EQ(ClassifyCudaPresence(cudaErrorStubLibrary, 0, true), CudaPresence::kNoDriver);
  EXPECT_EQ(ClassifyCudaPresence(cudaErrorStubLibrary, 0, false), CudaPresence::kNoDriver);
  // A driver that is there but older than the runtime is not "no driver".
  EXPECT_EQ(ClassifyCudaPresence(cudaErrorInsufficientDriver, 0, true), CudaPresence::kBroken);
}

TEST(CudaPresenceTest, NoGpuWhenTheDriverShowsNone) {
  EXPECT_EQ(ClassifyCudaPresence(cudaErrorNoDevice, 0, true), CudaPresence::kNoGpu);
}

TEST(CudaPresenceTest, EveryOtherErrorFails) {
  for (const cudaError_t error :
       {cudaErrorInitializationError, cudaErrorDevicesUnavailable, cudaErrorSystemDriverMismatch,
        cudaErrorCompatNotSupportedOnDevice, cudaErrorOperatingSystem, cudaErrorUnknown,
        cudaErrorNotPermitted, cudaErrorInvalidDevice}) {
    EXPECT_EQ(ClassifyCudaPresence(error, 0, true), CudaPresence::kBroken)
        << cudaGetErrorName(error);
    EXPECT_EQ(ClassifyCudaPresence(error, 0, false), CudaPresence::kBroken)
        << cudaGetErrorName(error);
  }
}

TEST(CudaPresenceTest, StatusesFallBackOnlyForAbsence) {
  const Status no_driver = CudaPresenceStatus(
      CudaPresence::kNoDriver, cudaErrorInsufficientDriver,
      "libcuda.so.1: cannot open shared object file: No such file or directory", 0);
  EXPECT_EQ(no_driver.code(), StatusCode::kUnavailable);
  EXPECT_NE(no_driver.message().find("no NVIDIA driver: libcuda.so.1 could not be loaded"),
            std::string::npos)
      << no_driver.message();
  EXPECT_NE(no_driver.message().find("cannot open shared object file"), std::string::npos);
  EXPECT_NE(no_driver.message().find("cudaErrorInsufficientDriver"), std::string::npos);

  const Status stub = CudaPresenceStatus(CudaPresence::kNoDriver, cudaErrorStubLibrary, "", 0);
  EXPECT_EQ(stub.code(), StatusCode::kUnavailable);
  EXPECT_NE(stub.message().find("stub"), std::string::npos) << stub.message();

  const Status no_gpu = CudaPresenceStatus(CudaPresence::kNoGpu, cudaErrorNoDevice, "", 13000);
  EXPECT_EQ(no_gpu.code(), StatusCode::kUnavailable);
  EXPECT_NE(no_gpu.message().find("no CUDA GPU"), std::string::npos) << no_gpu.message();
  EXPECT_NE(no_gpu.message().find("CUDA 13.0"), std::string::npos) << no_gpu.message();

  const Status old =
      CudaPresenceStatus(CudaPresence::kBroken, cudaErrorInsufficientDriver, "", 12040);
  EXPECT_EQ(old.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(old.message().find("older than"), std::string::npos) << old.message();
  EXPECT_NE(old.message().find("12.4"), std::string::npos) << old.message();

  const Status broken =
      CudaPresenceStatus(CudaPresence::kBroken, cudaErrorInitializationError, "", 13000);
  EXPECT_EQ(broken.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(broken.message().find("cudaErrorInitializationError"), std::string::npos)
      << broken.message();
  EXPECT_NE(broken.message().find("installed but CUDA cannot use it"), std::string::npos);
}

TEST(CudaPresenceTest, TheLoaderSaysWhyTheDriverIsMissing) {
  std::string loader_error;
  if (CudaDriverLoadable(loader_error)) GTEST_SKIP() << "an NVIDIA driver is installed here";
  EXPECT_NE(loader_error.find("libcuda.so.1"), std::string::npos) << loader_error;
}

}  // namespace
}  // namespace gshare
