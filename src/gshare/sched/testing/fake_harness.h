// FakeHarness: the executor contract's harness (executor_contract.h) over FakeExecutor.
#pragma once

#include <memory>

#include "gshare/sched/testing/executor_contract.h"
#include "gshare/sched/testing/fake_executor.h"

namespace gshare::testing {

class FakeHarness final : public ExecutorHarness {
 public:
  explicit FakeHarness(FaultPlan plan = {}) : plan_(plan) {}

  void Build(const GpuType& gpu, std::vector<ResolvedFunction> functions,
             std::vector<Request> requests) override {
    registry_ = std::make_unique<FunctionRegistry>(std::move(functions));
    executor_ = std::make_unique<FakeExecutor>(std::vector<GpuType>{gpu}, registry_.get(), plan_);
    for (const Request& r : requests) executor_->Arrive(r);
  }
  Executor& executor() override { return *executor_; }
  Status Run(Scheduler& scheduler) override {
    executor_->set_scheduler(&scheduler);
    return executor_->RunToEnd(1'000'000);
  }

 private:
  FaultPlan plan_;
  std::unique_ptr<FunctionRegistry> registry_;
  std::unique_ptr<FakeExecutor> executor_;
};

}  // namespace gshare::testing
