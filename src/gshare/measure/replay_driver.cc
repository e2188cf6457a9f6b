#include "gshare/measure/replay_driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "gshare/measure/replay_server.h"
#include "gshare/protocol/kserve_json.h"
#include "gshare/sim/simulator.h"

namespace gshare::measure {
namespace {

constexpr Duration kProgressInterval = std::chrono::seconds(10);
// Errors of each kind printed in full; the rest are counted.
constexpr std::uint64_t kErrorsShown = 5;

}  // namespace

ReplayDriver::ReplayDriver(net::HttpEndpoint endpoint, std::vector<ReplayTarget> targets,
                           examples::OutputChecker& checker, const Workload& workload,
                           int concurrency, const ReferenceAnswers* references)
    : endpoint_(std::move(endpoint)),
      targets_(std::move(targets)),
      checker_(checker),
      workload_(workload),
      concurrency_(concurrency),
      references_(references),
      meter_(std::span<const GpuType>(&workload.gpu, 1), TimePoint{}) {
  counts_.functions.resize(targets_.size());
}

void ReplayDriver::Run(const std::vector<PlannedRequest>& plan) {
  {
    MutexLock lock(mutex_);
    idle_ = concurrency_;
  }
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(concurrency_));
  for (int i = 0; i < concurrency_; ++i) workers.emplace_back([this] { Work(); });
  std::thread progress([this, total = plan.size()] { Progress(total); });
  for (const PlannedRequest& request : plan) {
    const Duration wait = request.due - (clock_.Now() - TimePoint{});
    if (wait > Duration::zero()) std::this_thread::sleep_for(wait);
    {
      MutexLock lock(mutex_);
      if (idle_ == 0) {
        ++counts_.late_sends;
        worker_free_.Wait(mutex_, [this]() REQUIRES(mutex_) { return idle_ > 0; });
      }
      --idle_;
      queue_.push_back(request);
      ++sent_;
    }
    work_ready_.NotifyOne();
  }
  {
    MutexLock lock(mutex_);
    closing_ = true;
  }
  work_ready_.NotifyAll();
  for (std::thread& worker : workers) worker.join();
  {
    MutexLock lock(mutex_);
    finished_ = true;
  }
  progress_wake_.NotifyAll();
  progress.join();
}

PolicyReport ReplayDriver::Report(std::string policy) {
  MutexLock lock(mutex_);
  meter_.Freeze(last_answer_);
  return MakePolicyReport(std::move(policy), meter_, meter_.Totals(last_answer_),
                          workload_.functions, workload_.gpu, TimePoint{}, 0);
}

ReplayDriver::Counts ReplayDriver::counts() {
  MutexLock lock(mutex_);
  return counts_;
}

void ReplayDriver::Work() {
  net::HttpClient client(endpoint_);
  for (;;) {
    PlannedRequest request;
    {
      MutexLock lock(mutex_);
      work_ready_.Wait(mutex_, [this]() REQUIRES(mutex_) { return !queue_.empty() || closing_; });
      if (queue_.empty()) return;
      request = queue_.front();
      queue_.pop_front();
    }
    Send(client, request);
    {
      MutexLock lock(mutex_);
      ++idle_;
    }
    worker_free_.NotifyOne();
  }
}

void ReplayDriver::Send(net::HttpClient& client, const PlannedRequest& planned) {
  const ReplayTarget& target = targets_[planned.function];
  InferRequest infer;
  Result<std::string> body = std::string();
  if (target.reference != nullptr && target.reference_body.size() > 1) {
    // {"id":"N", then the rest of the serialized request (no copy of its tensors made here).
    body = fmt::format("{{\"id\":\"{}\",{}", planned.id,
                       std::string_view(target.reference_body).substr(1));
  } else {
    {
      MutexLock lock(checker_mutex_);
      auto input = checker_.InputFor(target.model, planned.id);
      if (input.ok()) infer.inputs.push_back(std::move(input).value());
    }
    infer.id = std::to_string(planned.id);
    body = SerializeInferRequest(infer);
  }
  net::ClientRequest request;
  request.method = "POST";
  request.target = target.infer_path;
  request.content_type = "application/json";
  request.headers = {{"Authorization", target.authorization}};
  if (body.ok()) request.body = std::move(body).value();
  const TimePoint sent = clock_.Now();
  auto answer = client.Send(
      request, std::chrono::duration_cast<std::chrono::milliseconds>(target.answer_timeout));
  std::string wrong_why;
  if (answer.ok() && answer->status == 200) {
    wrong_why = CheckAnswer(target, planned.id, answer->body);
  }
  const bool right = answer.ok() && answer->status == 200 && wrong_why.empty();

  MutexLock lock(mutex_);
  // Read under the lock, so that the Meter sees its times in order.
  const TimePoint now = clock_.Now();
  last_answer_ = std::max(last_answer_, now);
  Request metered;
  metered.id = planned.id;
  metered.function = planned.function;
  metered.arrival = sent;
  metered.deadline = sent + target.slo;
  // A 504 is the server's word that the request could not start by its deadline and never ran.
  const AnswerOutcome outcome = right                                  ? AnswerOutcome::kOk
                                : answer.ok() && answer->status == 504 ? AnswerOutcome::kNeverRan
                                                                       : AnswerOutcome::kFailed;
  meter_.Answered(now, metered, outcome);
  PerFunction& function = counts_.functions[planned.function];
  if (!answer.ok()) {
    ++counts_.unanswered;
    ++function.unanswered;
    if (counts_.unanswered <= kErrorsShown) {
      std::fprintf(stderr, "request %llu got no answer: %s\n",
                   static_cast<unsigned long long>(planned.id), answer.status().ToString().c_str());
    }
    return;
  }
  ++counts_.answered;
  ++counts_.statuses[answer->status];
  ++function.statuses[answer->status];
  if (answer->status == 200 && !target.checked && target.reference == nullptr &&
      wrong_why.empty()) {
    ++counts_.unchecked;
  }
  if (!wrong_why.empty()) {
    ++counts_.wrong;
    ++function.wrong;
    if (counts_.wrong <= kErrorsShown) {
      std::fprintf(stderr, "wrong answer to request %llu: %s\n",
                   static_cast<unsigned long long>(planned.id), wrong_why.c_str());
    }
  }
  if (answer->status != 200 && ++error_answers_ <= kErrorsShown) {
    std::fprintf(stderr, "request %llu answered %d: %s\n",
                 static_cast<unsigned long long>(planned.id), answer->status,
                 ErrorOf(*answer).c_str());
  }
}

std::string ReplayDriver::CheckAnswer(const ReplayTarget& target, RequestId id,
                                      const std::string& body) {
  auto response = ParseInferResponse(body);
  if (!response.ok()) return "not an inference response: " + response.status().message();
  if (response->id != std::to_string(id)) {
    return fmt::format("the answer's id is {}, not {}", response->id.value_or("absent"), id);
  }
  if (target.reference != nullptr && references_ != nullptr) {
    return references_->Check(*target.reference, response->outputs);
  }
  if (!target.checked) return "";
  if (response->outputs.size() != 1) {
    return fmt::format("{} outputs, not one", response->outputs.size());
  }
  MutexLock lock(checker_mutex_);
  const Status right = checker_.Check(target.model, id, response->outputs.front());
  return right.ok() ? "" : right.message();
}

void ReplayDriver::Progress(std::size_t total) {
  MutexLock lock(mutex_);
  for (;;) {
    if (progress_wake_.WaitFor(mutex_, kProgressInterval,
                               [this]() REQUIRES(mutex_) { return finished_; })) {
      return;
    }
    std::string errors;
    for (const auto& [status, count] : counts_.statuses) {
      if (status != 200) errors += fmt::format(", {} x{}", status, count);
    }
    if (counts_.unanswered > 0) errors += fmt::format(", no answer x{}", counts_.unanswered);
    std::fprintf(stderr, "  %.0f s: %llu of %zu sent, %llu answered%s\n",
                 ToSeconds(clock_.Now() - TimePoint{}), static_cast<unsigned long long>(sent_),
                 total, static_cast<unsigned long long>(counts_.answered), errors.c_str());
  }
}

}  // namespace gshare::measure
