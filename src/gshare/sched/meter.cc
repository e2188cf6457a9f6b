#include "gshare/sched/meter.h"

namespace gshare {

Meter::Meter(std::span<const GpuType> gpu_types, TimePoint accounting_start)
    : gpu_types_(gpu_types.begin(), gpu_types.end()),
      start_(accounting_start),
      type_gpus_(gpu_types.size()) {}

void Meter::Touch(TimePoint now) {
  if (baseline_taken_ || now < start_) return;
  baseline_taken_ = true;
  baseline_ = Read(start_);
  gpus_.ResetPeak();
}

Meter::PerFunction& Meter::Function(FunctionId function) {
  if (function >= functions_.size()) functions_.resize(function + 1);
  return functions_[function];
}

void Meter::ChangeGpus(TimePoint now, GpuTypeId type, int delta) {
  if (frozen_) return;
  Touch(now);
  gpus_.Change(now, delta);
  if (type < type_gpus_.size()) type_gpus_[type].Change(now, delta);
  const int level = static_cast<int>(gpus_.level());
  if (!gpu_timeline_.empty() && gpu_timeline_.back().first == now) {
    gpu_timeline_.back().second = level;
  } else {
    gpu_timeline_.emplace_back(now, level);
  }
}

void Meter::Reserved(TimePoint now, FunctionId function, double delta_bytes) {
  if (frozen_) return;
  Touch(now);
  reserved_.Change(now, delta_bytes);
  Function(function).reserved.Change(now, delta_bytes);
}

void Meter::Active(TimePoint now, FunctionId function, double delta_bytes) {
  if (frozen_) return;
  Touch(now);
  Function(function).active.Change(now, delta_bytes);
}

void Meter::Restored(TimePoint now, FunctionId function, std::uint64_t bytes) {
  if (frozen_) return;
  Touch(now);
  FunctionMeterTotals& counts = Function(function).counts;
  counts.restores += 1;
  counts.restore_bytes += bytes;
}

void Meter::Checkpointed(TimePoint now, FunctionId function, std::uint64_t bytes) {
  if (frozen_) return;
  Touch(now);
  FunctionMeterTotals& counts = Function(function).counts;
  counts.checkpoints += 1;
  counts.checkpoint_bytes += bytes;
}

void Meter::Answered(TimePoint now, const Request& request, AnswerOutcome outcome) {
  if (frozen_) return;
  Touch(now);
  if (request.arrival < start_) return;  // warm-up
  FunctionMeterTotals& counts = Function(request.function).counts;
  counts.requests += 1;
  if (outcome != AnswerOutcome::kOk) {
    counts.failed += 1;
    if (outcome == AnswerOutcome::kNeverRan) counts.never_ran += 1;
    return;
  }
  counts.latency_ms.push_back(static_cast<float>(ToMilliseconds(now - request.arrival)));
  if (now <= request.deadline) counts.met += 1;
}

Meter::Reading Meter::Read(TimePoint t) const {
  Reading r;
  r.gpu_seconds = gpus_.IntegralUntil(t);
  r.type_gpu_seconds.reserve(type_gpus_.size());
  for (const UsageMeter& m : type_gpus_) r.type_gpu_seconds.push_back(m.IntegralUntil(t));
  r.reserved_byte_seconds = reserved_.IntegralUntil(t);
  r.functions.resize(functions_.size());
  for (std::size_t f = 0; f < functions_.size(); ++f) {
    const PerFunction& pf = functions_[f];
    FunctionMeterTotals& out = r.functions[f];
    out.reserved_byte_seconds = pf.reserved.IntegralUntil(t);
    out.active_byte_seconds = pf.active.IntegralUntil(t);
    out.restores = pf.counts.restores;
    out.restore_bytes = pf.counts.restore_bytes;
    out.checkpoints = pf.counts.checkpoints;
    out.checkpoint_bytes = pf.counts.checkpoint_bytes;
  }
  return r;
}

void Meter::Freeze(TimePoint now) {
  if (frozen_) return;
  Touch(now);
  frozen_totals_ = Totals(now);
  frozen_ = true;
  if (gpu_timeline_.empty() || gpu_timeline_.back().first != now) {
    gpu_timeline_.emplace_back(now, static_cast<int>(gpus_.level()));
  }
}

MeterTotals Meter::Totals(TimePoint now) const {
  if (frozen_) return frozen_totals_;
  const Reading base = baseline_taken_ ? baseline_ : Read(start_);
  const Reading end = Read(now);
  MeterTotals t;
  t.start = start_;
  t.horizon = now;
  t.gpu_seconds = end.gpu_seconds - base.gpu_seconds;
  for (std::size_t i = 0; i < gpu_types_.size(); ++i) {
    const double seconds = end.type_gpu_seconds[i] - base.type_gpu_seconds[i];
    t.cost_usd += seconds * gpu_types_[i].price_per_hour_usd / 3600.0;
  }
  t.peak_gpus = static_cast<int>(baseline_taken_ ? gpus_.peak() : gpus_.level());
  t.reserved_byte_seconds = end.reserved_byte_seconds - base.reserved_byte_seconds;
  t.functions.resize(functions_.size());
  for (std::size_t f = 0; f < functions_.size(); ++f) {
    FunctionMeterTotals& out = t.functions[f];
    const FunctionMeterTotals& e = end.functions[f];
    const FunctionMeterTotals zero;
    const FunctionMeterTotals& b = f < base.functions.size() ? base.functions[f] : zero;
    out.reserved_byte_seconds = e.reserved_byte_seconds - b.reserved_byte_seconds;
    out.active_byte_seconds = e.active_byte_seconds - b.active_byte_seconds;
    out.restores = e.restores - b.restores;
    out.restore_bytes = e.restore_bytes - b.restore_bytes;
    out.checkpoints = e.checkpoints - b.checkpoints;
    out.checkpoint_bytes = e.checkpoint_bytes - b.checkpoint_bytes;
    const FunctionMeterTotals& counts = functions_[f].counts;
    out.requests = counts.requests;
    out.met = counts.met;
    out.failed = counts.failed;
    out.never_ran = counts.never_ran;
    out.latency_ms = counts.latency_ms;
    t.restores += out.restores;
    t.restore_bytes += out.restore_bytes;
    t.checkpoints += out.checkpoints;
    t.checkpoint_bytes += out.checkpoint_bytes;
    t.requests += out.requests;
    t.met += out.met;
    t.failed += out.failed;
    t.never_ran += out.never_ran;
  }
  return t;
}

}  // namespace gshare
