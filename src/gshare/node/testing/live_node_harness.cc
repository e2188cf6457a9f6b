#include "gshare/node/testing/live_node_harness.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace gshare::testing {

void LiveNodeHarness::Build(const GpuType& gpu, std::vector<ResolvedFunction> functions,
                            std::vector<Request> requests) {
  Teardown();
  drained_ = false;
  LiveNodeOptions options;
  options.calibrate_copies = false;  // tests time nothing
  options.devices.backend = DeviceBackend::kEmulated;
  options.devices.emulated.assign(
      2, EmulatedGpuConfig{.name = "",
                           .memory_bytes = gpu.memory_bytes,
                           .link_bytes_per_second = gpu.h2d_bytes_per_second});
  options.prepared_bytes_per_gpu = 256 * kMiB;
  options.staging_bytes = 16 * kGiB;
  options.snapshot_pool_bytes = kGiB;
  options.restore_overhead = Duration::zero();
  options.price_per_hour_usd = gpu.price_per_hour_usd;
  options.policy = "";  // the test's scheduler
  options.policy_options.slice_granularity = granularity;
  options.executor.distinct_device_ranges = true;  // instances share this process
  if (configure) configure(options);
  LiveNodeParts parts;
  if (configure_parts) configure_parts(parts);
  parts.clock = [this](boost::asio::io_context& loop) {
    auto clock = std::make_unique<ManualLoopClock>(loop);
    clock_ = clock.get();
    return clock;
  };
  parts.host = InProcessHost::Factory(&host_);
  auto node = LiveNode::Create(std::move(options), std::move(parts));
  if (!node.ok()) {
    ADD_FAILURE() << "the live node did not start: " << node.status().ToString();
    return;
  }
  node_ = std::move(node).value();
  for (ResolvedFunction& function : functions) {
    node_->AddFunction({.function = std::move(function), .command = {}, .run_timeout = {}});
  }
  const std::vector<GpuType> types = {node_->gpu_type()};
  meter_ = std::make_unique<Meter>(types, TimePoint{});
  node_->executor().AddMeter(*meter_);
  requests_ = std::move(requests);
}

Status LiveNodeHarness::RunUntil(const std::function<bool()>& done) {
  LiveExecutor& executor = node_->executor();
  return clock_->RunUntil(done, [&executor] { return executor.WorkInFlight(); });
}

Status LiveNodeHarness::Run(Scheduler& scheduler) {
  if (node_ == nullptr) return FailedPrecondition("the harness has no node");
  LiveExecutor& executor = node_->executor();
  executor.set_scheduler(&scheduler);
  std::size_t submitted = 0;
  std::vector<LoopTimer> arrivals;
  for (const Request& request : requests_) {
    arrivals.push_back(clock_->At(request.arrival, [this, &submitted, request] {
      ++submitted;
      node_->Submit(request);
    }));
  }
  GSHARE_RETURN_IF_ERROR(RunUntil([&] {
    return (submitted == requests_.size() && !executor.Busy()) || !executor.violation().ok();
  }));
  if (!executor.violation().ok()) return executor.violation();
  if (executor.unanswered() > 0) {
    return Internal(fmt::format("{} requests unanswered", executor.unanswered()));
  }
  return Status::Ok();
}

void LiveNodeHarness::Drain() {
  if (drained_ || node_ == nullptr) return;
  drained_ = true;
  node_->executor().Shutdown();
  // Everything in flight runs to its end: what sleeps on the clock (a kernel, a copy) moves time
  // itself from now on.
  clock_->RunFree();
  host_->StopAll();
  if (!host_->WaitExited(std::chrono::minutes(1))) {
    ADD_FAILURE() << "an in-process instance did not end within a minute of its stop";
  }
  node_->FinishCopies();
  // Their completions run on the shut-down executor, and let go of the slices they hold.
  node_->loop().poll();
  node_->Shutdown();
}

void LiveNodeHarness::Teardown() {
  if (node_ == nullptr) return;
  Drain();
  node_.reset();
  meter_.reset();
  clock_ = nullptr;
  host_ = nullptr;
}

}  // namespace gshare::testing
