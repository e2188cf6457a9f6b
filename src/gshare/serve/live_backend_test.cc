// The live backend over a live node whose instances are hosted in the test's process
// (node/testing/in_process_host.h): versions come and go without leaving anything behind.
#include "gshare/serve/live_backend.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <future>
#include <memory>
#include <string>

#include "gshare/model/catalog.h"
#include "gshare/node/testing/in_process_host.h"
#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::serve {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

FunctionSpec Spec(const std::string& tenant, const std::string& name, const std::string& slo) {
  auto spec = ParseFunctionEntry(
      fmt::format("name: {}\nmodel_size: 1Mi\ngpu_memory: 8Mi\nexec_latency: 1ms\nslo: {}\n"
                  "max_batch: 4\nruntime: echo\n",
                  name, slo),
      "test", tenant);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : FunctionSpec{};
}

InferRequest OneElement() {
  InferRequest request;
  const float value = 1.5f;
  request.inputs.push_back(
      Tensor::FromValues<float>("input", {1, 1}, std::span<const float>(&value, 1)).value());
  return request;
}

class LiveBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    // The data directory is entered by tenants' uids where the test runs as root.
    std::filesystem::permissions(dir_.path(), std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
    auto metrics = metrics::GshareMetrics::Create();
    ASSERT_TRUE(metrics.ok());
    metrics_ = std::move(metrics).value();
    LiveBackendOptions options;
    options.data_dir = dir_.path() / "data";
    std::filesystem::create_directories(options.data_dir);
    options.function_program = "/bin/true";  // instances are hosted in this process
    LiveNodeOptions& node = options.node;
    node.calibrate_copies = false;
    node.devices.backend = DeviceBackend::kEmulated;
    node.devices.emulated = {EmulatedGpuConfig{.name = "",
                                               .memory_bytes = kGiB,
                                               .link_bytes_per_second = 12e9,
                                               .prepared_bytes = 0,
                                               .clock = nullptr}};
    node.staging_bytes = kGiB;
    node.snapshot_pool_bytes = 64 * kMiB;
    node.prepared_bytes_per_gpu = 0;
    node.policy_options.instance_start = Duration::zero();
    node.executor.distinct_device_ranges = true;  // the instances share this process
    options.parts.host = testing::InProcessHost::Factory(&host_);
    auto backend = LiveBackend::Create(*metrics_, std::move(options));
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(backend).value();
  }

  // Deploys `spec` and waits for its deploy to settle; its status.
  Status DeployAndSettle(const FunctionSpec& spec) {
    auto done = std::make_shared<std::promise<Status>>();
    auto settled = done->get_future();
    GSHARE_RETURN_IF_ERROR(backend_->Deploy(spec, [done](Status s) { done->set_value(s); }));
    if (settled.wait_for(seconds(60)) != std::future_status::ready) {
      return DeadlineExceeded("the deploy did not settle");
    }
    return settled.get();
  }

  // One request to the current version of tenant/name; its answer.
  Result<InferResponse> InferOne(const std::string& tenant, const std::string& name) {
    auto done = std::make_shared<std::promise<Result<InferResponse>>>();
    auto answered = done->get_future();
    backend_->Infer(tenant, name, OneElement(), backend_->clock().Now() + seconds(10),
                    [done](Result<InferAnswer> r) {
                      if (!r.ok()) return done->set_value(r.status());
                      done->set_value(std::move(r).value().Take());
                    });
    if (answered.wait_for(seconds(60)) != std::future_status::ready) {
      return DeadlineExceeded("no answer");
    }
    return answered.get();
  }

  TempDirForTest dir_;
  std::unique_ptr<metrics::GshareMetrics> metrics_;
  testing::InProcessHost* host_ = nullptr;
  std::unique_ptr<LiveBackend> backend_;
};

// One record per version: 1,000 versions deployed (a create and an update of each function),
// called, and deleted leave every table of the backend and of its node as it was at the start.
TEST_F(LiveBackendTest, AThousandVersionsComeAndGoAndTheTablesReturnToTheirSize) {
  const LiveBackend::Tables before = backend_->tables();
  EXPECT_EQ(before.entries + before.versions + before.pending + before.feed, 0u);
  EXPECT_EQ(before.node.registry + before.node.scheduler + before.node.executor, 0u);
  int answered = 0;
  for (int round = 0; round < 500; ++round) {
    const std::string name = fmt::format("f{}", round % 7);
    ASSERT_TRUE(DeployAndSettle(Spec("t", name, "1s")).ok()) << round;
    ASSERT_TRUE(DeployAndSettle(Spec("t", name, "2s")).ok()) << round;  // an update: a version
    auto answer = InferOne("t", name);
    ASSERT_TRUE(answer.ok()) << round << ": " << answer.status().ToString();
    ASSERT_EQ(answer->outputs.size(), 1u);
    ++answered;
    ASSERT_TRUE(backend_->Undeploy("t", name).ok()) << round;
  }
  ASSERT_TRUE(backend_->WaitUntilDrained(milliseconds(60'000)).ok());
  const LiveBackend::Tables after = backend_->tables();
  EXPECT_EQ(answered, 500);
  EXPECT_EQ(after.entries, before.entries);
  EXPECT_EQ(after.versions, before.versions);
  EXPECT_EQ(after.pending, before.pending);
  EXPECT_EQ(after.feed, before.feed);
  EXPECT_EQ(after.node.registry, before.node.registry);
  EXPECT_EQ(after.node.scheduler, before.node.scheduler);
  EXPECT_EQ(after.node.executor, before.node.executor);
  EXPECT_EQ(after.node.draining, 0u);
  EXPECT_EQ(metrics_->Expose().find("function=\"f"), std::string::npos);
}

// A function kept cold (its room in the snapshot pool taken back) deploys without starting an
// instance ahead of need, and its first request starts one and is answered.
TEST_F(LiveBackendTest, AColdFunctionDeploysWithoutAnInstanceAndItsFirstRequestStartsOne) {
  backend_->KeepWarm("t", "cold", false);
  ASSERT_TRUE(DeployAndSettle(Spec("t", "cold", "1s")).ok());
  EXPECT_EQ(host_->started, 0);
  auto answer = InferOne("t", "cold");
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->outputs.size(), 1u);
  EXPECT_EQ(host_->started, 1);
  // Warm again: a new version prepares its instance as any deploy does.
  backend_->KeepWarm("t", "cold", true);
  ASSERT_TRUE(DeployAndSettle(Spec("t", "cold", "2s")).ok());
  EXPECT_EQ(host_->started, 2);
  ASSERT_TRUE(backend_->Undeploy("t", "cold").ok());
  ASSERT_TRUE(backend_->WaitUntilDrained(milliseconds(60'000)).ok());
}

}  // namespace
}  // namespace gshare::serve
