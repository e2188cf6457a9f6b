// GshareMetrics: the metric set of a gShare node, defined in one place (docs/metrics.md).
//
// Every metric is in base units (seconds, bytes) and carries the "gshare_" prefix. Per-function
// series are labelled {function, tenant}; requests also by outcome. Two kinds of source feed them:
//  - the front, through a function's FunctionSeries: each request's outcome and latency, the time
//    it queued before its run started, and each restore's duration;
//  - the accounting, through a MeterFeed that receives the same events as the node's Meter
//    (sched/meter.h) and integrates them with the Meter's own UsageMeter: GPUs held and their
//    GPU-seconds, vGPU memory reserved and its byte-seconds, restores (swaps) and their bytes,
//    checkpoints and their bytes, and SLO attainment as the Meter defines it (answered OK by the
//    deadline). Over any interval, the difference of a counter equals what a Meter whose window
//    is that interval reports, up to floating-point rounding.
//
// Thread-safety: everything is thread-safe. FunctionSeries updates are lock-free; MeterFeed
// takes its own mutex per event (the event loop) and per Publish (the scrape).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/metrics/registry.h"
#include "gshare/model/request.h"
#include "gshare/sched/executor.h"
#include "gshare/sched/meter.h"

namespace gshare::metrics {

// How the front finished a request; the `outcome` label of gshare_requests_total.
enum class RequestOutcome : std::uint8_t {
  kOk,                // answered with the function's result (on time or late)
  kError,             // the function or the node failed it (5xx other than 504)
  kDeadlineExceeded,  // could not start before its deadline; never run (504)
  kRejected,          // refused for overload or quota (429)
  kCancelled,         // the client went away before it started
};
inline constexpr std::size_t kRequestOutcomeCount = 5;
std::string_view RequestOutcomeName(RequestOutcome outcome);

// Bucket bounds, in seconds.
std::span<const double> RequestLatencyBuckets();
std::span<const double> QueueTimeBuckets();
std::span<const double> RestoreTimeBuckets();

// The series of one deployed function. Kept by whoever serves the function; updates are cheap.
class FunctionSeries {
 public:
  // The front answered (or refused) a request `latency` after it arrived. The latency histogram
  // counts requests that ran (kOk and kError); every outcome is counted in gshare_requests_total.
  void RequestFinished(RequestOutcome outcome, Duration latency);
  // A request's run started `queued` after the request arrived.
  void RequestStarted(Duration queued);
  // A restore of the function onto a GPU finished after `duration`.
  void RestoreFinished(Duration duration);

 private:
  friend class GshareMetrics;
  friend class MeterFeed;

  std::array<std::shared_ptr<Counter>, kRequestOutcomeCount> requests_;
  std::shared_ptr<Histogram> latency_;
  std::shared_ptr<Histogram> queue_time_;
  std::shared_ptr<Histogram> restore_time_;
  // Fed by the MeterFeed.
  std::shared_ptr<Counter> swaps_;
  std::shared_ptr<Counter> swap_bytes_;
  std::shared_ptr<Counter> checkpoints_;
  std::shared_ptr<Counter> checkpoint_bytes_;
  std::shared_ptr<Counter> checkpoint_skipped_bytes_;
  std::shared_ptr<Gauge> vgpu_memory_;
  std::shared_ptr<Counter> vgpu_byte_seconds_;
  std::shared_ptr<Counter> slo_met_;
  std::shared_ptr<Counter> slo_missed_;
  std::shared_ptr<Gauge> slo_attainment_;
};

class GshareMetrics {
 public:
  // Registers the whole set. Fails only on a broken definition (a bug), never at run time.
  static Result<std::unique_ptr<GshareMetrics>> Create();

  // The series of function `function` of `tenant`, created at 0 on first use (the same object
  // on later calls).
  Result<std::shared_ptr<FunctionSeries>> AddFunction(std::string_view function,
                                                      std::string_view tenant);
  // Drops every series of the function from the exposition (a deleted function); NotFound when
  // it was not added. Holders of its FunctionSeries may keep updating it, to no effect.
  Status RemoveFunction(std::string_view function, std::string_view tenant);

  // The front answered an inference request that came by `protocol` ("http" or "grpc") with
  // `status`, the HTTP status (a gRPC answer counts the HTTP status its gRPC status maps from):
  // gshare_inference_answers_total. Any thread.
  void InferenceAnswered(std::string_view protocol, int status);

  Gauge& gpus_in_use() { return *gpus_in_use_; }
  Counter& gpu_seconds() { return *gpu_seconds_; }

  // The text format 0.0.4; serve it with Registry::kContentType.
  std::string Expose() const { return registry_.Expose(); }
  Registry& registry() { return registry_; }

 private:
  GshareMetrics() = default;
  Status Register();

  Registry registry_;
  CounterFamily* requests_ = nullptr;
  CounterFamily* inference_answers_ = nullptr;
  // Its children for http (0) and grpc (1) by status 100-599, made on first use and read without
  // a lock after (the registry's lookup takes its mutex); kept alive by answers_kept_.
  static constexpr int kFirstStatus = 100;
  static constexpr int kStatuses = 500;
  std::array<std::array<std::atomic<Counter*>, kStatuses>, 2> answers_{};
  Mutex answers_mutex_;
  std::vector<std::shared_ptr<Counter>> answers_kept_ GUARDED_BY(answers_mutex_);
  HistogramFamily* latency_ = nullptr;
  HistogramFamily* queue_time_ = nullptr;
  HistogramFamily* restore_time_ = nullptr;
  CounterFamily* swaps_ = nullptr;
  CounterFamily* swap_bytes_ = nullptr;
  CounterFamily* checkpoints_ = nullptr;
  CounterFamily* checkpoint_bytes_ = nullptr;
  CounterFamily* checkpoint_skipped_bytes_ = nullptr;
  GaugeFamily* vgpu_memory_ = nullptr;
  CounterFamily* vgpu_byte_seconds_ = nullptr;
  CounterFamily* slo_requests_ = nullptr;
  GaugeFamily* slo_attainment_ = nullptr;
  std::shared_ptr<Gauge> gpus_in_use_;
  std::shared_ptr<Counter> gpu_seconds_;

  Mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<FunctionSeries>> functions_
      GUARDED_BY(mutex_);
};

// MeterFeed: the Meter's events, turned into the accounting metrics. It is a MeterSink that the
// executor feeds exactly as it feeds a Meter, with the same calls, so the two can never
// disagree; its window is the node's whole life (no accounting start, no freeze). Times passed in
// never go backward. Bind a FunctionId to its series before the function's first event: events of
// an unbound function count in the node's GPU figures only.
class MeterFeed final : public MeterSink {
 public:
  explicit MeterFeed(GshareMetrics& metrics) : metrics_(metrics) {}

  // `id` feeds `series` from now on (its counters count from this moment).
  void Bind(FunctionId id, std::shared_ptr<FunctionSeries> series);
  // `id` feeds nothing any more (its function was deleted).
  void Unbind(FunctionId id);

  // Functions bound now (tests: the feed holds only live functions).
  std::size_t bound() const EXCLUDES(mutex_);

  // MeterSink.
  void GpuAcquired(TimePoint now, GpuTypeId type) override { ChangeGpus(now, type, +1); }
  void GpuReleased(TimePoint now, GpuTypeId type) override { ChangeGpus(now, type, -1); }
  void Reserved(TimePoint now, FunctionId function, double delta_bytes) override;
  // Active memory is not exported.
  void Active(TimePoint /*now*/, FunctionId /*function*/, double /*delta_bytes*/) override {}
  void Restored(TimePoint now, FunctionId function, std::uint64_t bytes) override;
  void Checkpointed(TimePoint now, FunctionId function, std::uint64_t bytes) override;
  void CheckpointSkipped(TimePoint now, FunctionId function, std::uint64_t bytes) override;
  void Answered(TimePoint now, const Request& request, AnswerOutcome outcome) override;

  // Brings the time integrals (GPU-seconds, vGPU byte-seconds) up to `now`; call it before each
  // exposition. A `now` before the last event counts as that event's time.
  void Publish(TimePoint now);

 private:
  struct PerFunction {
    std::shared_ptr<FunctionSeries> series;  // null: unbound
    UsageMeter reserved;
    double published_byte_seconds = 0;
  };

  void ChangeGpus(TimePoint now, GpuTypeId type, int delta);
  // The function's figures; null when it is not bound.
  PerFunction* Function(FunctionId id) REQUIRES(mutex_);
  TimePoint Clamp(TimePoint now) REQUIRES(mutex_);
  void PublishGpus(TimePoint now) REQUIRES(mutex_);
  static void PublishFunction(PerFunction& f, TimePoint now);

  GshareMetrics& metrics_;
  mutable Mutex mutex_;
  TimePoint last_ GUARDED_BY(mutex_){};
  UsageMeter gpus_ GUARDED_BY(mutex_);
  double published_gpu_seconds_ GUARDED_BY(mutex_) = 0;
  std::map<FunctionId, PerFunction> functions_ GUARDED_BY(mutex_);
};

}  // namespace gshare::metrics
