#include "gshare/node/memory_sampler.h"

#include <algorithm>

#include "gshare/common/proc_memory.h"

namespace gshare {

Result<MemorySample> SampleMemory(double t_s, std::span<const pid_t> pids) {
  auto own = ReadOwnMemory();
  if (!own.ok()) return own.status();
  MemorySample sample;
  sample.t_s = t_s;
  sample.node_rss_bytes = own->rss_bytes;
  sample.node_rss_anon_bytes = own->rss_anon_bytes;
  sample.node_rss_shmem_bytes = own->rss_shmem_bytes;
  for (const pid_t pid : pids) {
    auto memory = ReadProcessMemory(pid);
    if (!memory.ok()) continue;  // it exited after being listed (or became unreadable)
    sample.functions_rss_bytes += memory->rss_bytes;
    sample.functions_rss_anon_bytes += memory->rss_anon_bytes;
    sample.functions_rss_shmem_bytes += memory->rss_shmem_bytes;
    ++sample.processes;
  }
  return sample;
}

std::optional<double> GrowthAfterWarmup(std::span<const MemorySample> samples, double warmup_end_s,
                                        std::size_t window,
                                        const std::function<double(const MemorySample&)>& value) {
  if (window == 0) return std::nullopt;
  // Samples are in time order: [0, warm) lie at or before the end of the warm-up.
  const auto after = std::find_if(samples.begin(), samples.end(),
                                  [&](const MemorySample& s) { return s.t_s > warmup_end_s; });
  const auto warm = static_cast<std::size_t>(after - samples.begin());
  if (warm == 0 || warm == samples.size()) return std::nullopt;
  auto mean = [&](std::size_t first, std::size_t last) {
    double sum = 0;
    for (std::size_t i = first; i < last; ++i) sum += value(samples[i]);
    return sum / static_cast<double>(last - first);
  };
  const double baseline = mean(warm - std::min(window, warm), warm);
  const double final_value =
      mean(samples.size() - std::min(window, samples.size()), samples.size());
  if (baseline <= 0) return std::nullopt;
  return (final_value - baseline) / baseline;
}

MemorySampler::MemorySampler(LoopClock& clock, Duration interval,
                             std::function<std::vector<pid_t>()> pids)
    : clock_(clock), interval_(interval), pids_(std::move(pids)) {}

void MemorySampler::Start() {
  running_ = true;
  started_ = clock_.Now();
  next_ = started_;
  Sample();
  Arm();
}

void MemorySampler::Stop() {
  running_ = false;
  timer_.Cancel();
}

void MemorySampler::Sample() {
  const std::vector<pid_t> pids = pids_();
  auto sample = SampleMemory(ToSeconds(clock_.Now() - started_), pids);
  if (!sample.ok()) {
    if (error_.ok()) error_ = sample.status();
    return;
  }
  samples_.push_back(*sample);
}

void MemorySampler::Arm() {
  next_ += interval_;
  // A loop held up past a whole interval takes one sample late, not a burst of catch-up ones.
  if (const TimePoint now = clock_.Now(); next_ < now) next_ = now + interval_;
  timer_ = clock_.At(next_, [this] {
    if (!running_) return;
    Sample();
    Arm();
  });
}

}  // namespace gshare
