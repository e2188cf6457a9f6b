// PolicyReport: what one policy did on one workload, as the reports show it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gshare/sim/schedule_log.h"

namespace gshare {

struct LatencySummary {
  double p50_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
  double mean_ms = 0;
  double max_ms = 0;
};

struct FunctionReport {
  std::string name;
  std::string tenant;
  std::uint64_t requests = 0;
  double slo_ms = 0;
  double slo_attainment = 0;
  LatencySummary latency;
  std::uint64_t swaps = 0;
  std::uint64_t swap_bytes = 0;
  double vgpu_gib_seconds = 0;    // GPU memory reserved for the function x seconds
  double active_gib_seconds = 0;  // ... of which while it had a run in flight
  double serverless_usd = 0;      // its bill at the GPU type's GB-second prices
};

struct PolicyReport {
  std::string policy;
  std::uint64_t requests = 0;
  std::uint64_t failed_requests = 0;     // answered with an error (counted as missed)
  std::uint64_t never_ran_requests = 0;  // of those, cancelled before they started
  double slo_attainment = 0;             // fraction of requests answered OK by their deadline
  LatencySummary latency;                // completion - arrival
  double accounting_start_seconds = 0;   // the window starts here (after a warm-up, if any)
  double horizon_seconds = 0;  // the window's length: from its start to the last completion
  double gpu_seconds = 0;      // GPUs held x seconds within the window
  double avg_gpus = 0;         // gpu_seconds / horizon_seconds
  int peak_gpus = 0;
  double vgpu_gib_seconds = 0;  // GPU memory reserved by functions x seconds (GiB-s)
  std::uint64_t swaps = 0;      // restores of a model onto a GPU (cold loads included)
  std::uint64_t swap_bytes = 0;
  // The trace's own compute in the window (ComputeGpuSeconds): no policy can change it.
  double compute_gpu_seconds = 0;
  double utilisation = 0;     // compute_gpu_seconds / gpu_seconds (0 without GPU time)
  double cost_usd = 0;        // gpu_seconds x the GPU type's hourly price / 3600
  double serverless_usd = 0;  // the tenants' bill at serverless GB-second prices
  std::uint64_t events = 0;   // simulated events (arrivals, completions, timers, ...)
  std::vector<FunctionReport> functions;
  std::vector<std::pair<double, int>> gpu_timeline;  // (seconds, GPUs held) at each change
  std::vector<float> sorted_latency_ms;              // for the CDF
  ScheduleLog schedule;  // every restore and run, when SimulatedExecutor::Options asked for it
  std::vector<std::uint32_t> decision_ns;  // per event, when Options::time_decisions
};

}  // namespace gshare
