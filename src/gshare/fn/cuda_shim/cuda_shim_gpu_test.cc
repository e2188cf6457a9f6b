// The CUDA allocator shim on a real GPU: an unmodified CUDA program (cuda_shim_test_program,
// with the runtime linked statically and shared) runs with the shim preloaded, and the test is
// its node: it allocates each slice as the node does (cuMemCreate, exported as a POSIX
// descriptor), sends it over the control channel, checkpoints the program's memory into host
// memory, restores it into another allocation and unlocks it. The program's pointers stay valid
// and its bytes identical; allocations past the quota fail and reach the node; memory the shim
// does not serve (managed) is forwarded. The test loads the driver itself (it links no CUDA
// library) and skips, saying why, without a driver or a GPU.
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gshare/common/testing/beside_self.h"
#include "gshare/common/testing/line_child.h"
#include "gshare/fn/control_channel.h"

extern char** environ;

namespace gshare::fn {
namespace {

constexpr std::uint64_t kReserve = 1ULL << 30;
constexpr std::uint64_t kSliceBytes = 64ULL << 20;
constexpr std::uint64_t kQuota = 32ULL << 20;
constexpr int kChildControlFd = 3;

// The driver calls the test's node makes.
struct NodeDriver {
  void* library = nullptr;
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*primary_context_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*context_set_current)(CUcontext) = nullptr;
  CUresult (*granularity)(std::size_t*, const CUmemAllocationProp*,
                          CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, std::size_t, const CUmemAllocationProp*,
                     unsigned long long) = nullptr;
  CUresult (*export_handle)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                            unsigned long long) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*address_reserve)(CUdeviceptr*, std::size_t, std::size_t, CUdeviceptr,
                              unsigned long long) = nullptr;
  CUresult (*address_free)(CUdeviceptr, std::size_t) = nullptr;
  CUresult (*map)(CUdeviceptr, std::size_t, std::size_t, CUmemGenericAllocationHandle,
                  unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, std::size_t) = nullptr;
  CUresult (*set_access)(CUdeviceptr, std::size_t, const CUmemAccessDesc*, std::size_t) = nullptr;
  CUresult (*copy_to_host)(void*, CUdeviceptr, std::size_t) = nullptr;
  CUresult (*copy_to_device)(CUdeviceptr, const void*, std::size_t) = nullptr;

  template <typename Function>
  bool Resolve(Function& slot, const char* name) {
    slot = reinterpret_cast<Function>(::dlsym(library, name));
    return slot != nullptr;
  }
};

CUmemAllocationProp Exportable(CUdevice device) {
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = device;
  properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return properties;
}

// One slice of GPU memory as the node holds it: created exportable, and mapped in the node's own
// process so that it copies snapshots in and out.
class NodeSlice {
 public:
  NodeSlice(const NodeDriver& driver, CUdevice device, std::uint64_t bytes)
      : driver_(driver), bytes_(bytes) {
    const CUmemAllocationProp properties = Exportable(device);
    ok_ = driver_.create(&handle_, bytes, &properties, 0) == CUDA_SUCCESS &&
          driver_.address_reserve(&address_, bytes, 0, 0, 0) == CUDA_SUCCESS &&
          driver_.map(address_, bytes, 0, handle_, 0) == CUDA_SUCCESS;
    CUmemAccessDesc access{};
    access.location = properties.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ok_ = ok_ && driver_.set_access(address_, bytes, &access, 1) == CUDA_SUCCESS;
  }
  ~NodeSlice() {
    if (address_ != 0) {
      (void)driver_.unmap(address_, bytes_);
      (void)driver_.address_free(address_, bytes_);
    }
    if (handle_ != 0) (void)driver_.release(handle_);
  }
  NodeSlice(const NodeSlice&) = delete;
  NodeSlice& operator=(const NodeSlice&) = delete;

  bool ok() const { return ok_; }
  std::uint64_t bytes() const { return bytes_; }
  UniqueFd Export() const {
    int fd = -1;
    if (driver_.export_handle(&fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) !=
        CUDA_SUCCESS) {
      return UniqueFd();
    }
    return UniqueFd(fd);
  }
  std::vector<std::byte> CopyOut(std::uint64_t bytes) const {
    std::vector<std::byte> image(bytes);
    EXPECT_EQ(driver_.copy_to_host(image.data(), address_, bytes), CUDA_SUCCESS);
    return image;
  }
  void CopyIn(const std::vector<std::byte>& image) {
    EXPECT_EQ(driver_.copy_to_device(address_, image.data(), image.size()), CUDA_SUCCESS);
  }

 private:
  const NodeDriver& driver_;
  const std::uint64_t bytes_;
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr address_ = 0;
  bool ok_ = false;
};

// The CUDA program, started with the shim preloaded and the control channel as its fd 3: this
// process's environment without its own LD_PRELOAD and GSHARE_ variables, plus the node's.
std::unique_ptr<gshare::testing::LineChild> StartShimmed(const std::string& program,
                                                         const UniqueFd& control) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (text.starts_with("LD_PRELOAD=") || text.starts_with("GSHARE_")) continue;
    env.emplace_back(text);
  }
  env.push_back("LD_PRELOAD=" + gshare::testing::BesideSelf(CUDA_SHIM_LIBRARY));
  env.push_back(std::string(kControlFdEnv) + "=" + std::to_string(kChildControlFd));
  env.push_back(std::string(kDeviceBaseEnv) + "=" + fmt::format("{:#x}", kDefaultDeviceBase));
  env.push_back(std::string(kDeviceReserveEnv) + "=" + std::to_string(kReserve));
  env.push_back("GSHARE_SHIM_VERBOSE=1");
  return gshare::testing::LineChild::Start({.argv = {program},
                                            .env = std::move(env),
                                            .pass_fd = control.get(),
                                            .pass_as = kChildControlFd});
}

// "info FREE TOTAL".
std::pair<std::uint64_t, std::uint64_t> FreeAndTotal(const std::string& reply) {
  unsigned long long free_bytes = 0;
  unsigned long long total_bytes = 0;
  EXPECT_EQ(std::sscanf(reply.c_str(), "info %llu %llu", &free_bytes, &total_bytes), 2) << reply;
  return {free_bytes, total_bytes};
}

std::uint64_t AddressIn(const std::string& reply) {
  const auto space = reply.rfind(' ');
  return std::stoull(reply.substr(space + 1), nullptr, 0);
}

// The parameter: the program's runtime, "static" or "shared".
class CudaShimGpuTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    driver_.library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver_.library == nullptr) GTEST_SKIP() << "no CUDA driver: " << ::dlerror();
    const bool resolved =
        driver_.Resolve(driver_.init, "cuInit") &&
        driver_.Resolve(driver_.device_get_count, "cuDeviceGetCount") &&
        driver_.Resolve(driver_.device_get, "cuDeviceGet") &&
        driver_.Resolve(driver_.primary_context_retain, "cuDevicePrimaryCtxRetain") &&
        driver_.Resolve(driver_.context_set_current, "cuCtxSetCurrent") &&
        driver_.Resolve(driver_.granularity, "cuMemGetAllocationGranularity") &&
        driver_.Resolve(driver_.create, "cuMemCreate") &&
        driver_.Resolve(driver_.export_handle, "cuMemExportToShareableHandle") &&
        driver_.Resolve(driver_.release, "cuMemRelease") &&
        driver_.Resolve(driver_.address_reserve, "cuMemAddressReserve") &&
        driver_.Resolve(driver_.address_free, "cuMemAddressFree") &&
        driver_.Resolve(driver_.map, "cuMemMap") && driver_.Resolve(driver_.unmap, "cuMemUnmap") &&
        driver_.Resolve(driver_.set_access, "cuMemSetAccess") &&
        driver_.Resolve(driver_.copy_to_host, "cuMemcpyDtoH_v2") &&
        driver_.Resolve(driver_.copy_to_device, "cuMemcpyHtoD_v2");
    ASSERT_TRUE(resolved) << "the CUDA driver lacks the virtual memory calls";
    if (const CUresult result = driver_.init(0); result != CUDA_SUCCESS) {
      GTEST_SKIP() << "cuInit failed (" << result << "): no usable GPU";
    }
    int count = 0;
    if (driver_.device_get_count(&count) != CUDA_SUCCESS || count == 0) {
      GTEST_SKIP() << "no CUDA GPU";
    }
    ASSERT_EQ(driver_.device_get(&device_, 0), CUDA_SUCCESS);
    ASSERT_EQ(driver_.primary_context_retain(&context_, device_), CUDA_SUCCESS);
    ASSERT_EQ(driver_.context_set_current(context_), CUDA_SUCCESS);
    std::size_t granularity = 0;
    const CUmemAllocationProp properties = Exportable(device_);
    ASSERT_EQ(driver_.granularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              CUDA_SUCCESS);
    ASSERT_EQ(kSliceBytes % granularity, 0u);
  }

  std::unique_ptr<NodeSlice> NewSlice() {
    auto slice = std::make_unique<NodeSlice>(driver_, device_, kSliceBytes);
    EXPECT_TRUE(slice->ok());
    return slice;
  }

  ControlMessage Expect(ControlType type) {
    auto received = node_.Receive();
    EXPECT_TRUE(received.ok()) << received.status().ToString();
    if (!received.ok()) return {};
    EXPECT_EQ(received->message.type, type) << ControlTypeName(received->message.type);
    return received->message;
  }

  // kMap of `slice` (a CUDA allocation's descriptor), kMapped, kUnlock: as the node's switch.
  void Attach(const NodeSlice& slice) {
    const UniqueFd exported = slice.Export();
    ASSERT_TRUE(exported.valid());
    ++generation_;
    ASSERT_TRUE(node_
                    .Send({.type = ControlType::kMap,
                           .reserved = static_cast<std::uint32_t>(MapHandleKind::kCudaPosixFd),
                           .a = slice.bytes(),
                           .b = kQuota,
                           .c = generation_},
                          exported.get())
                    .ok());
    const ControlMessage mapped = Expect(ControlType::kMapped);
    ASSERT_EQ(mapped.a, 0u) << "the program could not map its slice";
    ASSERT_EQ(mapped.c, generation_);
    ASSERT_TRUE(node_.Send({.type = ControlType::kUnlock}).ok());
  }

  // kLock, the image copied out, kUnmap.
  std::vector<std::byte> Checkpoint(const NodeSlice& slice) {
    EXPECT_TRUE(node_.Send({.type = ControlType::kLock}).ok());
    const ControlMessage locked = Expect(ControlType::kLocked);
    std::vector<std::byte> image = slice.CopyOut(locked.a);
    EXPECT_TRUE(node_.Send({.type = ControlType::kUnmap}).ok());
    Expect(ControlType::kUnmapped);
    return image;
  }

  NodeDriver driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  ControlChannel node_;
  std::uint64_t generation_ = 0;
};

TEST_P(CudaShimGpuTest, SwitchesAnUnmodifiedProgramBetweenGpuMemoryAndHostMemory) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  node_ = std::move(pair->first);
  const std::string path = gshare::testing::BesideSelf(std::string_view(GetParam()) == "static"
                                                           ? CUDA_SHIM_TEST_PROGRAM_STATIC
                                                           : CUDA_SHIM_TEST_PROGRAM_SHARED);
  const auto child = StartShimmed(path, pair->second);
  ASSERT_NE(child, nullptr);
  pair->second.Reset();  // the child's now
  gshare::testing::LineChild& program = *child;

  // The first allocation connects the shim: hello, then it waits for its slice.
  program.Send("alloc 1048576");
  const ControlMessage hello = Expect(ControlType::kHello);
  const std::uint64_t base = hello.b;
  ASSERT_GE(hello.c, kReserve);
  auto slice = NewSlice();
  Attach(*slice);
  const std::string first = program.ReadLine();
  ASSERT_EQ(first.rfind("alloc ok ", 0), 0u) << first;
  const std::uint64_t weights = AddressIn(first);
  EXPECT_GE(weights, base);
  EXPECT_LT(weights, base + hello.c);
  const std::string weights_text = fmt::format("{:#x}", weights);
  ASSERT_EQ(program.Ask("fill " + weights_text + " 1048576 7"), "fill ok");
  // The slice as the program sees it: the quota, less what it allocated (the runtime may have
  // allocated some of its own through the driver too).
  const auto [free_after_weights, total] = FreeAndTotal(program.Ask("info"));
  EXPECT_EQ(total, kQuota);
  EXPECT_LE(free_after_weights, kQuota - (1 << 20));
  const std::string second = program.Ask("alloc 4096");
  ASSERT_EQ(second.rfind("alloc ok ", 0), 0u) << second;
  const std::string cache_text = fmt::format("{:#x}", AddressIn(second));
  ASSERT_EQ(program.Ask("fill " + cache_text + " 4096 8"), "fill ok");

  // Checkpoint into host memory, free the GPU memory, restore into another allocation.
  const std::vector<std::byte> image = Checkpoint(*slice);
  EXPECT_GE(image.size(), AddressIn(second) + 4096 - base);
  slice.reset();
  slice = NewSlice();
  slice->CopyIn(image);
  Attach(*slice);
  EXPECT_EQ(program.Ask("check " + weights_text + " 1048576 7"), "check ok");
  EXPECT_EQ(program.Ask("check " + cache_text + " 4096 8"), "check ok");

  // Past the quota: refused, and the node hears of it before the program's answer.
  EXPECT_EQ(program.Ask("alloc " + std::to_string(kQuota)), "alloc error 2");
  const ControlMessage exceeded = Expect(ControlType::kQuotaExceeded);
  EXPECT_EQ(exceeded.a, kQuota);
  EXPECT_EQ(exceeded.b, kQuota);
  EXPECT_EQ(exceeded.c, kQuota - free_after_weights + 4096);

  // Managed memory is not the slice's: allocated and freed by the driver.
  EXPECT_EQ(program.Ask("managed 4096"), "managed ok");
  // Stream-ordered allocations and the driver's entry points handed out by the runtime are.
  const std::string async = program.Ask("async 8192");
  ASSERT_EQ(async.rfind("async ok ", 0), 0u) << async;
  EXPECT_GE(AddressIn(async), base);
  EXPECT_LT(AddressIn(async), base + kQuota);
  const std::string driver = program.Ask("driver 8192");
  ASSERT_EQ(driver.rfind("driver ok ", 0), 0u) << driver;
  EXPECT_GE(AddressIn(driver), base);
  EXPECT_LT(AddressIn(driver), base + kQuota);

  EXPECT_EQ(program.Ask("free " + cache_text), "free ok");
  EXPECT_EQ(FreeAndTotal(program.Ask("info")).first, free_after_weights);
  // A second round trip, after the program allocated and freed on the restored slice.
  const std::vector<std::byte> again = Checkpoint(*slice);
  slice.reset();
  slice = NewSlice();
  slice->CopyIn(again);
  Attach(*slice);
  EXPECT_EQ(program.Ask("check " + weights_text + " 1048576 7"), "check ok");
  const int status = program.Quit();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

INSTANTIATE_TEST_SUITE_P(Runtimes, CudaShimGpuTest, ::testing::Values("static", "shared"),
                         [](const auto& param_info) {
                           return std::string(param_info.param) + "Runtime";
                         });

}  // namespace
}  // namespace gshare::fn
