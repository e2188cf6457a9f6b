#include "gshare/metrics/gshare_metrics.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace gshare::metrics {
namespace {

constexpr std::array<double, 15> kRequestLatencyBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
constexpr std::array<double, 15> kQueueTimeBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30};
constexpr std::array<double, 14> kRestoreTimeBuckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                        0.5,   1,     2.5,  5,     10,   30,  60};

constexpr std::array<RequestOutcome, kRequestOutcomeCount> kOutcomes = {
    RequestOutcome::kOk, RequestOutcome::kError, RequestOutcome::kDeadlineExceeded,
    RequestOutcome::kRejected, RequestOutcome::kCancelled};

std::vector<double> Bounds(std::span<const double> bounds) {
  return {bounds.begin(), bounds.end()};
}

// Adds the increment of a time integral since it was last published (never negative).
void PublishIntegral(Counter* counter, double integral, double& published) {
  if (integral <= published) return;
  if (counter != nullptr) (void)counter->Add(integral - published);
  published = integral;
}

}  // namespace

std::string_view RequestOutcomeName(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::kOk:
      return "ok";
    case RequestOutcome::kError:
      return "error";
    case RequestOutcome::kDeadlineExceeded:
      return "deadline_exceeded";
    case RequestOutcome::kRejected:
      return "rejected";
    case RequestOutcome::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::span<const double> RequestLatencyBuckets() { return kRequestLatencyBuckets; }
std::span<const double> QueueTimeBuckets() { return kQueueTimeBuckets; }
std::span<const double> RestoreTimeBuckets() { return kRestoreTimeBuckets; }

void FunctionSeries::RequestFinished(RequestOutcome outcome, Duration latency) {
  requests_[static_cast<std::size_t>(outcome)]->Inc();
  if (outcome == RequestOutcome::kOk || outcome == RequestOutcome::kError) {
    (void)latency_->Observe(std::max(0.0, ToSeconds(latency)));
  }
}

void FunctionSeries::RequestStarted(Duration queued) {
  (void)queue_time_->Observe(std::max(0.0, ToSeconds(queued)));
}

void FunctionSeries::RestoreFinished(Duration duration) {
  (void)restore_time_->Observe(std::max(0.0, ToSeconds(duration)));
}

void GshareMetrics::InferenceAnswered(std::string_view protocol, int status) {
  const bool known = protocol == "http" || protocol == "grpc";
  if (!known || status < kFirstStatus || status >= kFirstStatus + kStatuses) {
    auto counter = inference_answers_->WithLabels({protocol, std::to_string(status)});
    if (counter.ok()) (*counter)->Inc();
    return;
  }
  std::atomic<Counter*>& slot = answers_[protocol == "grpc" ? 1 : 0][status - kFirstStatus];
  Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    MutexLock lock(answers_mutex_);
    counter = slot.load(std::memory_order_acquire);
    if (counter == nullptr) {
      auto made = inference_answers_->WithLabels({protocol, std::to_string(status)});
      if (!made.ok()) return;
      counter = made->get();
      answers_kept_.push_back(std::move(made).value());
      slot.store(counter, std::memory_order_release);
    }
  }
  counter->Inc();
}

Result<std::unique_ptr<GshareMetrics>> GshareMetrics::Create() {
  std::unique_ptr<GshareMetrics> metrics(new GshareMetrics());
  GSHARE_RETURN_IF_ERROR(metrics->Register());
  return metrics;
}

Status GshareMetrics::Register() {
  const std::vector<std::string> fn = {"function", "tenant"};
  GSHARE_ASSIGN_OR_RETURN(
      requests_,
      registry_.AddCounter("gshare_requests_total",
                           "Requests finished by the front, by function, tenant and "
                           "outcome (ok, error, deadline_exceeded, rejected, cancelled).",
                           {"function", "tenant", "outcome"}));
  GSHARE_ASSIGN_OR_RETURN(
      inference_answers_,
      registry_.AddCounter("gshare_inference_answers_total",
                           "Inference requests answered by the front, by protocol (http, grpc) and "
                           "code (the HTTP status; a gRPC answer's is the HTTP status its gRPC "
                           "status maps from), refusals before the body included.",
                           {"protocol", "code"}));
  GSHARE_ASSIGN_OR_RETURN(latency_,
                          registry_.AddHistogram("gshare_request_duration_seconds",
                                                 "Time from a request's arrival to its answer, for "
                                                 "requests that ran (outcome ok or error).",
                                                 fn, Bounds(kRequestLatencyBuckets)));
  GSHARE_ASSIGN_OR_RETURN(
      queue_time_, registry_.AddHistogram("gshare_request_queue_seconds",
                                          "Time from a request's arrival to the start of its run.",
                                          fn, Bounds(kQueueTimeBuckets)));
  GSHARE_ASSIGN_OR_RETURN(
      restore_time_, registry_.AddHistogram("gshare_restore_duration_seconds",
                                            "Time to restore a function's model onto a GPU.", fn,
                                            Bounds(kRestoreTimeBuckets)));
  GSHARE_ASSIGN_OR_RETURN(
      swaps_, registry_.AddCounter("gshare_swaps_total",
                                   "Restores of a function's model onto a GPU (cold loads "
                                   "included).",
                                   fn));
  GSHARE_ASSIGN_OR_RETURN(swap_bytes_,
                          registry_.AddCounter("gshare_swap_bytes_total",
                                               "Model bytes copied onto GPUs by restores.", fn));
  GSHARE_ASSIGN_OR_RETURN(
      checkpoints_, registry_.AddCounter(
                        "gshare_checkpoints_total",
                        "Evictions that copied a function's device state back to the host.", fn));
  GSHARE_ASSIGN_OR_RETURN(
      checkpoint_bytes_,
      registry_.AddCounter("gshare_checkpoint_bytes_total",
                           "Bytes copied back to the host by checkpointing evictions.", fn));
  GSHARE_ASSIGN_OR_RETURN(
      checkpoint_skipped_bytes_,
      registry_.AddCounter("gshare_checkpoint_skipped_bytes_total",
                           "Bytes of device state that evictions did not copy back because the "
                           "host snapshot held them already (fast swap).",
                           fn));
  GSHARE_ASSIGN_OR_RETURN(GaugeFamily * gpus,
                          registry_.AddGauge("gshare_gpus_in_use", "GPUs the node holds now."));
  GSHARE_ASSIGN_OR_RETURN(CounterFamily * gpu_seconds,
                          registry_.AddCounter("gshare_gpu_seconds_total",
                                               "GPUs held, integrated over time (GPU-seconds)."));
  GSHARE_ASSIGN_OR_RETURN(
      vgpu_memory_,
      registry_.AddGauge("gshare_vgpu_memory_allocated_bytes",
                         "GPU memory reserved by the function's vGPU slices now.", fn));
  GSHARE_ASSIGN_OR_RETURN(
      vgpu_byte_seconds_,
      registry_.AddCounter("gshare_vgpu_byte_seconds_total",
                           "vGPU memory reserved, integrated over time (byte-seconds).", fn));
  GSHARE_ASSIGN_OR_RETURN(
      slo_requests_,
      registry_.AddCounter("gshare_slo_requests_total",
                           "Requests answered by the node, by whether they met their SLO (met: "
                           "answered OK by the deadline; missed: late or failed).",
                           {"function", "tenant", "result"}));
  GSHARE_ASSIGN_OR_RETURN(
      slo_attainment_,
      registry_.AddGauge("gshare_slo_attainment_ratio",
                         "Fraction of the function's answered requests that met their SLO, since "
                         "the node started (1 before any).",
                         fn));
  GSHARE_ASSIGN_OR_RETURN(gpus_in_use_, gpus->WithLabels(std::span<const std::string_view>()));
  GSHARE_ASSIGN_OR_RETURN(gpu_seconds_,
                          gpu_seconds->WithLabels(std::span<const std::string_view>()));
  return Status::Ok();
}

Result<std::shared_ptr<FunctionSeries>> GshareMetrics::AddFunction(std::string_view function,
                                                                   std::string_view tenant) {
  MutexLock lock(mutex_);
  auto key = std::make_pair(std::string(function), std::string(tenant));
  if (auto it = functions_.find(key); it != functions_.end()) return it->second;
  auto series = std::make_shared<FunctionSeries>();
  for (const RequestOutcome outcome : kOutcomes) {
    GSHARE_ASSIGN_OR_RETURN(series->requests_[static_cast<std::size_t>(outcome)],
                            requests_->WithLabels({function, tenant, RequestOutcomeName(outcome)}));
  }
  GSHARE_ASSIGN_OR_RETURN(series->latency_, latency_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->queue_time_, queue_time_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->restore_time_, restore_time_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->swaps_, swaps_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->swap_bytes_, swap_bytes_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->checkpoints_, checkpoints_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->checkpoint_bytes_,
                          checkpoint_bytes_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->checkpoint_skipped_bytes_,
                          checkpoint_skipped_bytes_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->vgpu_memory_, vgpu_memory_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->vgpu_byte_seconds_,
                          vgpu_byte_seconds_->WithLabels({function, tenant}));
  GSHARE_ASSIGN_OR_RETURN(series->slo_met_, slo_requests_->WithLabels({function, tenant, "met"}));
  GSHARE_ASSIGN_OR_RETURN(series->slo_missed_,
                          slo_requests_->WithLabels({function, tenant, "missed"}));
  GSHARE_ASSIGN_OR_RETURN(series->slo_attainment_, slo_attainment_->WithLabels({function, tenant}));
  (void)series->slo_attainment_->Set(1.0);
  functions_.emplace(std::move(key), series);
  return series;
}

Status GshareMetrics::RemoveFunction(std::string_view function, std::string_view tenant) {
  MutexLock lock(mutex_);
  const auto it = functions_.find(std::make_pair(std::string(function), std::string(tenant)));
  if (it == functions_.end()) {
    return NotFound(fmt::format("no metrics for function '{}' of tenant '{}'", function, tenant));
  }
  functions_.erase(it);
  // Each series was created by AddFunction, so each removal finds its child.
  for (const RequestOutcome outcome : kOutcomes) {
    (void)requests_->Remove({function, tenant, RequestOutcomeName(outcome)});
  }
  for (HistogramFamily* family : {latency_, queue_time_, restore_time_}) {
    (void)family->Remove({function, tenant});
  }
  for (CounterFamily* family : {swaps_, swap_bytes_, checkpoints_, checkpoint_bytes_,
                                checkpoint_skipped_bytes_, vgpu_byte_seconds_}) {
    (void)family->Remove({function, tenant});
  }
  for (GaugeFamily* family : {vgpu_memory_, slo_attainment_}) {
    (void)family->Remove({function, tenant});
  }
  (void)slo_requests_->Remove({function, tenant, "met"});
  (void)slo_requests_->Remove({function, tenant, "missed"});
  return Status::Ok();
}

void MeterFeed::Bind(FunctionId id, std::shared_ptr<FunctionSeries> series) {
  MutexLock lock(mutex_);
  PerFunction& f = functions_[id];
  f.series = std::move(series);
  f.published_byte_seconds = f.reserved.IntegralUntil(last_);
  if (f.series) (void)f.series->vgpu_memory_->Set(f.reserved.level());
}

void MeterFeed::Unbind(FunctionId id) {
  MutexLock lock(mutex_);
  const auto it = functions_.find(id);
  if (it == functions_.end()) return;
  PublishFunction(it->second, last_);
  functions_.erase(it);
}

std::size_t MeterFeed::bound() const {
  MutexLock lock(mutex_);
  return functions_.size();
}

MeterFeed::PerFunction* MeterFeed::Function(FunctionId id) {
  auto it = functions_.find(id);
  return it == functions_.end() ? nullptr : &it->second;
}

TimePoint MeterFeed::Clamp(TimePoint now) {
  last_ = std::max(last_, now);
  return last_;
}

void MeterFeed::PublishGpus(TimePoint now) {
  PublishIntegral(&metrics_.gpu_seconds(), gpus_.IntegralUntil(now), published_gpu_seconds_);
}

void MeterFeed::PublishFunction(PerFunction& f, TimePoint now) {
  PublishIntegral(f.series ? f.series->vgpu_byte_seconds_.get() : nullptr,
                  f.reserved.IntegralUntil(now), f.published_byte_seconds);
}

void MeterFeed::ChangeGpus(TimePoint now, GpuTypeId /*type*/, int delta) {
  MutexLock lock(mutex_);
  now = Clamp(now);
  gpus_.Change(now, delta);
  PublishGpus(now);
  (void)metrics_.gpus_in_use().Set(gpus_.level());
}

void MeterFeed::Reserved(TimePoint now, FunctionId function, double delta_bytes) {
  MutexLock lock(mutex_);
  now = Clamp(now);
  PerFunction* f = Function(function);
  if (f == nullptr) return;
  f->reserved.Change(now, delta_bytes);
  PublishFunction(*f, now);
  if (f->series) (void)f->series->vgpu_memory_->Set(f->reserved.level());
}

void MeterFeed::Restored(TimePoint now, FunctionId function, std::uint64_t bytes) {
  MutexLock lock(mutex_);
  Clamp(now);
  const PerFunction* f = Function(function);
  if (f == nullptr || !f->series) return;
  f->series->swaps_->Inc();
  (void)f->series->swap_bytes_->Add(static_cast<double>(bytes));
}

void MeterFeed::Checkpointed(TimePoint now, FunctionId function, std::uint64_t bytes) {
  MutexLock lock(mutex_);
  Clamp(now);
  const PerFunction* f = Function(function);
  if (f == nullptr || !f->series) return;
  f->series->checkpoints_->Inc();
  (void)f->series->checkpoint_bytes_->Add(static_cast<double>(bytes));
}

void MeterFeed::CheckpointSkipped(TimePoint now, FunctionId function, std::uint64_t bytes) {
  MutexLock lock(mutex_);
  Clamp(now);
  const PerFunction* f = Function(function);
  if (f == nullptr || !f->series) return;
  (void)f->series->checkpoint_skipped_bytes_->Add(static_cast<double>(bytes));
}

void MeterFeed::Answered(TimePoint now, const Request& request, AnswerOutcome outcome) {
  MutexLock lock(mutex_);
  now = Clamp(now);
  PerFunction* f = Function(request.function);
  if (f == nullptr || !f->series) return;
  // The Meter's definition: met when answered OK by the deadline.
  const bool met = outcome == AnswerOutcome::kOk && now <= request.deadline;
  (met ? f->series->slo_met_ : f->series->slo_missed_)->Inc();
  const double met_count = f->series->slo_met_->value();
  const double answered = met_count + f->series->slo_missed_->value();
  (void)f->series->slo_attainment_->Set(met_count / answered);
}

void MeterFeed::Publish(TimePoint now) {
  MutexLock lock(mutex_);
  now = Clamp(now);
  PublishGpus(now);
  for (auto& [id, f] : functions_) PublishFunction(f, now);
}

}  // namespace gshare::metrics
