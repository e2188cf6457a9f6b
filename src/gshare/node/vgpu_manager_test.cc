#include "gshare/node/vgpu_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "gshare/common/random.h"
#include "gshare/device/device_registry.h"

namespace gshare {
namespace {

class VGpuManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceOptions options;
    options.backend = DeviceBackend::kEmulated;
    // Segments take memory only when written, so large capacities cost nothing here.
    options.emulated = *ParseEmulatedGpus("2Gi,1Gi,8Gi", 0);
    auto set = OpenDevices(options);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    set_ = std::move(set).value();
    for (auto& device : set_.devices) devices_.push_back(device.get());
    manager_ = std::make_unique<VGpuManager>(devices_, SliceGranularity());
  }

  SliceId MakeBoundSlice(int gpu, std::uint64_t quota, const std::string& function) {
    auto slice = manager_->CreateSlice(gpu, quota);
    EXPECT_TRUE(slice.ok()) << slice.status().ToString();
    EXPECT_TRUE(manager_->Bind(*slice, function).ok());
    return *slice;
  }

  DeviceSet set_;
  std::vector<Device*> devices_;
  std::unique_ptr<VGpuManager> manager_;
};

constexpr std::uint64_t kSlice = SliceGranularity::kDefaultBytes;

TEST_F(VGpuManagerTest, CreatesSlicesAtTheGranularity) {
  EXPECT_EQ(manager_->gpu_count(), 3);
  auto slice = manager_->CreateSlice(0, 4 * kSlice);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(*manager_->slice(*slice), (SliceInfo{*slice, 0, 4 * kSlice, 0, ""}));
  EXPECT_EQ(*manager_->gpu(0), (GpuUsage{0, 2 * kGiB, 4 * kSlice, 0, 1}));
  EXPECT_EQ(manager_->CreateSlice(0, kSlice + 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->CreateSlice(0, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->CreateSlice(3, kSlice).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->CreateSlice(-1, kSlice).status().code(), StatusCode::kInvalidArgument);
  // GPU 0 has 16 slices of 128 MiB: 12 left.
  EXPECT_EQ(manager_->CreateSlice(0, 13 * kSlice).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(manager_->CreateSlice(0, 12 * kSlice).ok());
  EXPECT_EQ(manager_->gpu(0)->reserved_bytes, 2 * kGiB);
}

TEST_F(VGpuManagerTest, UsesTheGranularityItIsGiven) {
  // The program's one granularity, here 100 MiB (accepted by the CLI, so the manager must agree).
  const SliceGranularity g = *SliceGranularity::FromBytes(100 * kMiB);
  VGpuManager manager(devices_, g);
  EXPECT_EQ(manager.granularity(), g);
  EXPECT_EQ(manager.gpu(0)->capacity_bytes, 2000 * kMiB);  // 2 GiB rounded down to 100 MiB steps
  EXPECT_TRUE(manager.CreateSlice(0, 300 * kMiB).ok());
  EXPECT_EQ(manager.CreateSlice(0, kSlice).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(VGpuManagerTest, BindsOneFunctionToOneSlice) {
  auto a = manager_->CreateSlice(1, kSlice);
  auto b = manager_->CreateSlice(1, kSlice);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(manager_->Bind(*a, "resnet").ok());
  EXPECT_EQ(*manager_->FindByFunction("resnet"), *a);
  EXPECT_EQ(manager_->Bind(*a, "bert").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(manager_->Bind(*b, "resnet").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(manager_->Bind(*b, "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->DestroySlice(*a).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(manager_->Unbind(*a).ok());
  EXPECT_EQ(manager_->Unbind(*a).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->FindByFunction("resnet").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(manager_->Bind(*b, "resnet").ok());
  ASSERT_TRUE(manager_->DestroySlice(*a).ok());
  EXPECT_EQ(manager_->slice(*a).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager_->gpu(1)->slice_count, 1u);
}

TEST_F(VGpuManagerTest, QuotaErrorLeavesEveryOtherSliceUntouched) {
  const SliceId victim = MakeBoundSlice(0, 2 * kSlice, "greedy");
  const SliceId neighbour = MakeBoundSlice(0, 4 * kSlice, "neighbour");
  const SliceId elsewhere = MakeBoundSlice(2, kSlice, "elsewhere");
  auto held = manager_->Allocate(victim, kSlice + 5);
  auto neighbour_memory = manager_->Allocate(neighbour, 3 * kSlice);
  auto elsewhere_memory = manager_->Allocate(elsewhere, 1000);
  ASSERT_TRUE(held.ok() && neighbour_memory.ok() && elsewhere_memory.ok());
  const auto slices_before = manager_->slices();
  std::vector<GpuUsage> gpus_before;
  std::vector<std::uint64_t> devices_before;
  for (int g = 0; g < 3; ++g) {
    gpus_before.push_back(*manager_->gpu(g));
    devices_before.push_back(devices_[static_cast<std::size_t>(g)]->allocated_bytes());
  }

  // The GPU has room (the neighbour's quota is unused in part), but the slice does not.
  auto over = manager_->Allocate(victim, kSlice);
  ASSERT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  const std::string& message = over.status().message();
  EXPECT_NE(message.find("slice " + std::to_string(victim)), std::string::npos) << message;
  EXPECT_NE(message.find("'greedy'"), std::string::npos) << message;
  EXPECT_NE(message.find("quota of 256.0 MiB"), std::string::npos) << message;

  EXPECT_EQ(manager_->slices(), slices_before);
  for (int g = 0; g < 3; ++g) {
    EXPECT_EQ(*manager_->gpu(g), gpus_before[static_cast<std::size_t>(g)]);
    EXPECT_EQ(devices_[static_cast<std::size_t>(g)]->allocated_bytes(),
              devices_before[static_cast<std::size_t>(g)]);
  }
  // The exact remainder still fits.
  auto rest = manager_->Allocate(victim, kSlice - 5);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(manager_->slice(victim)->used_bytes, 2 * kSlice);
}

// An accounting-only allocation (a process that allocates its own memory) is charged to its slice
// within the quota, names the slice's GPU, and takes nothing of the device's; freed, it is
// credited.
TEST_F(VGpuManagerTest, AnAccountingOnlyAllocationIsChargedButTakesNoDeviceMemory) {
  const SliceId slice = MakeBoundSlice(2, 2 * kSlice, "f");
  auto over = manager_->Allocate(slice, 2 * kSlice + 1, /*accounting_only=*/true);
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  auto memory = manager_->Allocate(slice, 2 * kSlice, /*accounting_only=*/true);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  EXPECT_EQ(&(*memory)->buffer().device(), devices_[2]);
  EXPECT_EQ((*memory)->size_bytes(), 2 * kSlice);
  EXPECT_EQ(manager_->slice(slice)->used_bytes, 2 * kSlice);
  EXPECT_EQ(manager_->gpu(2)->used_bytes, 2 * kSlice);
  EXPECT_EQ(devices_[2]->allocated_bytes(), 0u);
  EXPECT_FALSE((*memory)->buffer().Export().ok());
  memory.value().reset();
  EXPECT_EQ(manager_->slice(slice)->used_bytes, 0u);
  EXPECT_EQ(manager_->gpu(2)->used_bytes, 0u);
}

TEST_F(VGpuManagerTest, GrowsAndShrinks) {
  const SliceId slice = MakeBoundSlice(1, kSlice, "f");
  ASSERT_TRUE(manager_->Grow(slice, 3 * kSlice).ok());
  EXPECT_EQ(manager_->slice(slice)->quota_bytes, 4 * kSlice);
  auto memory = manager_->Allocate(slice, 3 * kSlice);
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(manager_->Shrink(slice, 2 * kSlice).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(manager_->Shrink(slice, kSlice).ok());
  EXPECT_EQ(manager_->Shrink(slice, 3 * kSlice).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->Grow(slice, 6 * kSlice).code(), StatusCode::kResourceExhausted)
      << "GPU 1 has 1 GiB: 8 slices";
  ASSERT_TRUE(manager_->Grow(slice, 5 * kSlice).ok());
  EXPECT_EQ(manager_->Resize(slice, kSlice / 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->gpu(1)->reserved_bytes, kGiB);
  EXPECT_EQ(manager_->Unbind(slice).code(), StatusCode::kFailedPrecondition);
  memory.value().reset();
  EXPECT_EQ(manager_->slice(slice)->used_bytes, 0u);
  EXPECT_TRUE(manager_->Unbind(slice).ok());
  EXPECT_EQ(manager_->Grow(99, kSlice).code(), StatusCode::kNotFound);
}

TEST_F(VGpuManagerTest, AllocationNeedsABoundSlice) {
  auto slice = manager_->CreateSlice(0, kSlice);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(manager_->Allocate(*slice, 10).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->Allocate(12345, 10).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(manager_->Bind(*slice, "f").ok());
  EXPECT_EQ(manager_->Allocate(*slice, 0).status().code(), StatusCode::kInvalidArgument);
}

// A plain model of the manager's accounting, checked against it after every step.
struct ReferenceModel {
  struct Slice {
    int gpu;
    std::uint64_t quota;
    std::uint64_t used = 0;
    std::string function;
  };
  std::vector<std::uint64_t> capacity;
  std::map<SliceId, Slice> slices;
  std::map<std::string, SliceId> bound;

  std::uint64_t Reserved(int gpu) const {
    std::uint64_t sum = 0;
    for (const auto& [id, s] : slices) sum += s.gpu == gpu ? s.quota : 0;
    return sum;
  }
  std::uint64_t Used(int gpu) const {
    std::uint64_t sum = 0;
    for (const auto& [id, s] : slices) sum += s.gpu == gpu ? s.used : 0;
    return sum;
  }
};

TEST_F(VGpuManagerTest, MatchesAReferenceModelUnderRandomOperations) {
  ReferenceModel model;
  for (Device* device : devices_) model.capacity.push_back(device->info().memory_bytes);
  struct Held {
    SliceId slice;
    std::uint64_t bytes;
    std::unique_ptr<SliceAllocation> allocation;
  };
  std::vector<Held> held;
  Random random(2024);
  const std::vector<std::string> functions = {"a", "b", "c", "d", "e", "f"};
  auto pick_slice = [&]() -> SliceId {
    // Mostly existing slices, sometimes an unknown id.
    if (model.slices.empty() || random.Bernoulli(0.05)) return 1000 + random.Below(10);
    auto it = model.slices.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(random.Below(model.slices.size())));
    return it->first;
  };
  auto random_quota = [&]() { return (1 + random.Below(6)) * kSlice; };
  int failures = 0;
  int allocations = 0;

  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(random.Below(8));
    StatusCode expected = StatusCode::kOk;
    StatusCode got = StatusCode::kOk;
    if (op == 0) {  // create
      const int gpu = static_cast<int>(random.Below(3));
      const std::uint64_t quota = random.Bernoulli(0.05) ? kSlice + 1 : random_quota();
      if (quota % kSlice != 0) {
        expected = StatusCode::kInvalidArgument;
      } else if (model.Reserved(gpu) + quota > model.capacity[static_cast<std::size_t>(gpu)]) {
        expected = StatusCode::kResourceExhausted;
      }
      auto id = manager_->CreateSlice(gpu, quota);
      got = id.status().code();
      if (id.ok()) model.slices.emplace(*id, ReferenceModel::Slice{gpu, quota, 0, ""});
    } else if (op == 1) {  // destroy
      const SliceId id = pick_slice();
      auto it = model.slices.find(id);
      if (it == model.slices.end()) {
        expected = StatusCode::kNotFound;
      } else if (!it->second.function.empty() || it->second.used != 0) {
        expected = StatusCode::kFailedPrecondition;
      }
      got = manager_->DestroySlice(id).code();
      if (got == StatusCode::kOk) model.slices.erase(id);
    } else if (op == 2) {  // bind
      const SliceId id = pick_slice();
      const std::string& function = functions[random.Below(functions.size())];
      auto it = model.slices.find(id);
      if (it == model.slices.end()) {
        expected = StatusCode::kNotFound;
      } else if (!it->second.function.empty() || model.bound.contains(function)) {
        expected = StatusCode::kAlreadyExists;
      }
      got = manager_->Bind(id, function).code();
      if (got == StatusCode::kOk) {
        it->second.function = function;
        model.bound[function] = id;
      }
    } else if (op == 3) {  // unbind
      const SliceId id = pick_slice();
      auto it = model.slices.find(id);
      if (it == model.slices.end()) {
        expected = StatusCode::kNotFound;
      } else if (it->second.function.empty() || it->second.used != 0) {
        expected = StatusCode::kFailedPrecondition;
      }
      got = manager_->Unbind(id).code();
      if (got == StatusCode::kOk) {
        model.bound.erase(it->second.function);
        it->second.function.clear();
      }
    } else if (op == 4) {  // resize
      const SliceId id = pick_slice();
      const std::uint64_t quota = random_quota();
      auto it = model.slices.find(id);
      if (it == model.slices.end()) {
        expected = StatusCode::kNotFound;
      } else if (quota > it->second.quota &&
                 model.Reserved(it->second.gpu) - it->second.quota + quota >
                     model.capacity[static_cast<std::size_t>(it->second.gpu)]) {
        expected = StatusCode::kResourceExhausted;
      } else if (quota < it->second.used) {
        expected = StatusCode::kFailedPrecondition;
      }
      got = manager_->Resize(id, quota).code();
      if (got == StatusCode::kOk) it->second.quota = quota;
    } else if (op <= 6) {  // allocate, sometimes beyond the quota
      const SliceId id = pick_slice();
      const std::uint64_t bytes = 1 + random.Below(random.Bernoulli(0.2) ? 8 * kSlice : kSlice);
      auto it = model.slices.find(id);
      if (it == model.slices.end()) {
        expected = StatusCode::kNotFound;
      } else if (it->second.function.empty()) {
        expected = StatusCode::kFailedPrecondition;
      } else if (it->second.used + bytes > it->second.quota) {
        expected = StatusCode::kResourceExhausted;
      }
      auto allocation = manager_->Allocate(id, bytes);
      got = allocation.status().code();
      if (allocation.ok()) {
        EXPECT_EQ((*allocation)->size_bytes(), bytes);
        it->second.used += bytes;
        ++allocations;
        held.push_back(Held{id, bytes, std::move(allocation).value()});
      }
    } else if (!held.empty()) {  // free
      const std::size_t index = random.Below(held.size());
      model.slices.at(held[index].slice).used -= held[index].bytes;
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(index));
    }
    ASSERT_EQ(got, expected) << "step " << step << ", operation " << op;
    failures += got != StatusCode::kOk;

    // The whole state agrees with the model, and with what the devices allocated.
    const auto slices = manager_->slices();
    ASSERT_EQ(slices.size(), model.slices.size()) << "step " << step;
    for (const SliceInfo& info : slices) {
      const auto& expected_slice = model.slices.at(info.id);
      ASSERT_EQ(info, (SliceInfo{info.id, expected_slice.gpu, expected_slice.quota,
                                 expected_slice.used, expected_slice.function}))
          << "step " << step;
    }
    for (int g = 0; g < 3; ++g) {
      const GpuUsage usage = *manager_->gpu(g);
      ASSERT_EQ(usage.reserved_bytes, model.Reserved(g)) << "step " << step;
      ASSERT_EQ(usage.used_bytes, model.Used(g)) << "step " << step;
      ASSERT_LE(usage.reserved_bytes, usage.capacity_bytes);
      ASSERT_EQ(devices_[static_cast<std::size_t>(g)]->allocated_bytes(), model.Used(g));
    }
  }
  EXPECT_GT(failures, 100) << "the sequence should exercise the error paths";
  EXPECT_GT(allocations, 100) << "and the successful ones";
  held.clear();
  for (int g = 0; g < 3; ++g) EXPECT_EQ(manager_->gpu(g)->used_bytes, 0u);
}

TEST_F(VGpuManagerTest, ConcurrentAllocationsNeverExceedTheQuota) {
  const SliceId shared = MakeBoundSlice(0, 2 * kSlice, "shared");
  std::atomic<bool> over_quota{false};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Random random(static_cast<std::uint64_t>(t));
      for (int i = 0; i < 300; ++i) {
        auto allocation = manager_->Allocate(shared, 1 + random.Below(kSlice));
        if (!allocation.ok()) {
          if (allocation.status().code() != StatusCode::kResourceExhausted) over_quota = true;
          ++refused;
          continue;
        }
        if (manager_->slice(shared)->used_bytes > 2 * kSlice) over_quota = true;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_FALSE(over_quota);
  EXPECT_EQ(manager_->slice(shared)->used_bytes, 0u);
  EXPECT_EQ(devices_[0]->allocated_bytes(), 0u);
}

}  // namespace
}  // namespace gshare
