// Reports of a simulation: a table on stdout, summary.json, CSV files and gnuplot figures.
//
// summary.json follows the output contract of `gshare sim` (docs/simulator.md): seed, trace,
// and per policy requests, slo_attainment, latency_ms {p50, p95, p99}, gpu_seconds, avg_gpus,
// peak_gpus, vgpu_gib_seconds, swaps, swap_bytes, cost_usd (plus a few extra fields). It holds
// no wall-clock figure, so the same inputs give a byte-identical file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/sim/policy_report.h"
#include "gshare/sim/workload/workload.h"

namespace gshare {

struct RunInfo {
  std::uint64_t seed = 0;
  std::string trace_path;
  std::string trace_format;
  std::string gpu_type;
  std::string exec_noise = "none";  // FormatExecNoise; written to the summary when not "none"
  std::string world = "ideal";      // WorldModel::Describe
};

// The summary document as JSON text (2-space indent, trailing newline).
std::string SummaryJson(const RunInfo& info, const Workload& workload,
                        const std::vector<PolicyReport>& reports);

// The side-by-side table printed on stdout.
std::string SummaryTable(const RunInfo& info, const Workload& workload,
                         const std::vector<PolicyReport>& reports);

// Writes summary.json, policies.csv, functions.csv (per policy and function), gpus_<policy>.dat,
// latency_cdf.dat and the gnuplot scripts into `dir` (created if missing). Then renders
// gpus.png and latency_cdf.png with gnuplot when it is installed; when it is not, `figures_note`
// says so and the scripts stay for later. Errors: the directory or a file cannot be written.
Status WriteReports(const std::string& dir, const RunInfo& info, const Workload& workload,
                    const std::vector<PolicyReport>& reports, std::string* figures_note);

}  // namespace gshare
