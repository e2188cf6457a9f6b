#include "gshare/sim/report.h"

#include <fmt/format.h>
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gshare/sim/figures.h"
#include "gshare/sim/simulator.h"

namespace gshare {
namespace {

using Json = nlohmann::ordered_json;

double TraceSpanSeconds(const Workload& workload) {
  if (workload.requests.empty()) return 0;
  return SinceEpochSeconds(workload.requests.back().arrival) -
         SinceEpochSeconds(workload.requests.front().arrival);
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Step data of GPUs held, at most ~4000 points: beyond that, the maximum per time bin.
std::string GpuTimelineData(const PolicyReport& report) {
  std::string out = "# seconds gpus_held\n";
  const auto& timeline = report.gpu_timeline;
  constexpr std::size_t kMaxPoints = 4000;
  if (timeline.size() <= kMaxPoints) {
    int previous = 0;
    for (const auto& [t, n] : timeline) {
      out += fmt::format("{:.6f} {}\n{:.6f} {}\n", t, previous, t, n);
      previous = n;
    }
    return out;
  }
  const double end = std::max(report.horizon_seconds, timeline.back().first);
  const double bin = end / static_cast<double>(kMaxPoints);
  std::size_t i = 0;
  int level = 0;
  for (std::size_t b = 0; b < kMaxPoints; ++b) {
    const double bin_end = static_cast<double>(b + 1) * bin;
    int peak = level;
    while (i < timeline.size() && timeline[i].first < bin_end) {
      level = timeline[i].second;
      peak = std::max(peak, level);
      ++i;
    }
    out += fmt::format("{:.6f} {}\n", static_cast<double>(b) * bin, peak);
  }
  return out;
}

}  // namespace

std::string SummaryJson(const RunInfo& info, const Workload& workload,
                        const std::vector<PolicyReport>& reports) {
  Json doc;
  doc["seed"] = info.seed;
  doc["world"] = info.world;
  Json trace;
  trace["path"] = info.trace_path;
  trace["format"] = info.trace_format;
  if (info.exec_noise != "none") trace["exec_noise"] = info.exec_noise;
  trace["gpu_type"] = info.gpu_type;
  trace["requests"] = workload.requests.size();
  trace["functions"] = workload.functions.size();
  trace["span_seconds"] = TraceSpanSeconds(workload);
  doc["trace"] = trace;
  Json policies = Json::object();
  for (const PolicyReport& r : reports) {
    Json p;
    p["requests"] = r.requests;
    p["failed_requests"] = r.failed_requests;
    p["never_ran_requests"] = r.never_ran_requests;
    p["slo_attainment"] = r.slo_attainment;
    p["latency_ms"] = {{"p50", r.latency.p50_ms},
                       {"p95", r.latency.p95_ms},
                       {"p99", r.latency.p99_ms},
                       {"mean", r.latency.mean_ms},
                       {"max", r.latency.max_ms}};
    p["gpu_seconds"] = r.gpu_seconds;
    p["avg_gpus"] = r.avg_gpus;
    p["peak_gpus"] = r.peak_gpus;
    p["vgpu_gib_seconds"] = r.vgpu_gib_seconds;
    p["swaps"] = r.swaps;
    p["swap_bytes"] = r.swap_bytes;
    p["cost_usd"] = r.cost_usd;
    p["compute_gpu_seconds"] = r.compute_gpu_seconds;
    p["utilisation"] = r.utilisation;
    p["serverless_usd"] = r.serverless_usd;
    p["accounting_start_seconds"] = r.accounting_start_seconds;
    p["horizon_seconds"] = r.horizon_seconds;
    p["events"] = r.events;
    policies[r.policy] = p;
  }
  doc["policies"] = policies;
  return doc.dump(2) + "\n";
}

std::string SummaryTable(const RunInfo& info, const Workload& workload,
                         const std::vector<PolicyReport>& reports) {
  std::string out =
      fmt::format("trace {} ({}): {} requests, {} functions, {:.1f} s; GPU type {}\n",
                  info.trace_path, info.trace_format, workload.requests.size(),
                  workload.functions.size(), TraceSpanSeconds(workload), info.gpu_type);
  out += fmt::format("world {}\n", info.world);
  out += fmt::format(
      "{:<20} {:>9} {:>8} {:>9} {:>9} {:>9} {:>11} {:>6} {:>8} {:>5} {:>12} {:>9} {:>10} {:>10}\n",
      "policy", "requests", "SLO", "p50 ms", "p95 ms", "p99 ms", "GPU-s", "util", "avg GPU", "peak",
      "vGPU GiB-s", "swaps", "cost USD", "bill USD");
  for (const PolicyReport& r : reports) {
    out += fmt::format(
        "{:<20} {:>9} {:>7.2f}% {:>9.2f} {:>9.2f} {:>9.2f} {:>11.1f} {:>5.1f}% {:>8.2f} {:>5} "
        "{:>12.1f} {:>9} {:>10.2f} {:>10.2f}\n",
        r.policy, r.requests, 100.0 * r.slo_attainment, r.latency.p50_ms, r.latency.p95_ms,
        r.latency.p99_ms, r.gpu_seconds, 100.0 * r.utilisation, r.avg_gpus, r.peak_gpus,
        r.vgpu_gib_seconds, r.swaps, r.cost_usd, r.serverless_usd);
  }
  // Requests cancelled before they started (their latest start passed): misses that never ran.
  std::string never_ran;
  for (const PolicyReport& r : reports) {
    if (r.never_ran_requests > 0) {
      never_ran +=
          fmt::format("{}{} {}", never_ran.empty() ? "" : ", ", r.policy, r.never_ran_requests);
    }
  }
  if (!never_ran.empty()) out += "never ran (cancelled at their latest start): " + never_ran + "\n";
  return out;
}

Status WriteReports(const std::string& dir, const RunInfo& info, const Workload& workload,
                    const std::vector<PolicyReport>& reports, std::string* figures_note) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("cannot create output directory {}: {}", dir, ec.message()));
  const fs::path root(dir);

  GSHARE_RETURN_IF_ERROR(
      WriteTextFile(root / "summary.json", SummaryJson(info, workload, reports)));

  std::string policies_csv =
      "policy,requests,slo_attainment,p50_ms,p95_ms,p99_ms,gpu_seconds,avg_gpus,peak_gpus,"
      "vgpu_gib_seconds,swaps,swap_bytes,cost_usd,serverless_usd,compute_gpu_seconds,"
      "utilisation\n";
  std::string functions_csv =
      "policy,function,tenant,requests,slo_ms,slo_attainment,p50_ms,p99_ms,swaps,swap_bytes,"
      "vgpu_gib_seconds,active_gib_seconds,serverless_usd\n";
  for (const PolicyReport& r : reports) {
    policies_csv += fmt::format(
        "{},{},{:.6f},{:.4f},{:.4f},{:.4f},{:.3f},{:.4f},{},{:.3f},{},{},{:.4f},{:.4f},{:.3f},"
        "{:.6f}\n",
        r.policy, r.requests, r.slo_attainment, r.latency.p50_ms, r.latency.p95_ms,
        r.latency.p99_ms, r.gpu_seconds, r.avg_gpus, r.peak_gpus, r.vgpu_gib_seconds, r.swaps,
        r.swap_bytes, r.cost_usd, r.serverless_usd, r.compute_gpu_seconds, r.utilisation);
    for (const FunctionReport& f : r.functions) {
      functions_csv +=
          fmt::format("{},{},{},{},{:.4f},{:.6f},{:.4f},{:.4f},{},{},{:.3f},{:.3f},{:.6f}\n",
                      r.policy, CsvField(f.name), CsvField(f.tenant), f.requests, f.slo_ms,
                      f.slo_attainment, f.latency.p50_ms, f.latency.p99_ms, f.swaps, f.swap_bytes,
                      f.vgpu_gib_seconds, f.active_gib_seconds, f.serverless_usd);
    }
    GSHARE_RETURN_IF_ERROR(
        WriteTextFile(root / fmt::format("gpus_{}.dat", r.policy), GpuTimelineData(r)));
  }
  GSHARE_RETURN_IF_ERROR(WriteTextFile(root / "policies.csv", policies_csv));
  GSHARE_RETURN_IF_ERROR(WriteTextFile(root / "functions.csv", functions_csv));

  // Latency CDF: one block per policy, 1000 quantiles each.
  std::string cdf = "# latency_ms cumulative_fraction (one block per policy)\n";
  for (const PolicyReport& r : reports) {
    cdf += fmt::format("# {}\n", r.policy);
    const auto n = r.sorted_latency_ms.size();
    for (int q = 1; q <= 1000 && n > 0; ++q) {
      const double fraction = q / 1000.0;
      cdf += fmt::format("{:.6f} {:.4f}\n", Percentile(r.sorted_latency_ms, fraction * 100.0),
                         fraction);
    }
    cdf += "\n\n";
  }
  GSHARE_RETURN_IF_ERROR(WriteTextFile(root / "latency_cdf.dat", cdf));

  std::string gpus_plot = fmt::format(
      "set terminal pngcairo size 1000,500\nset output 'gpus.png'\n"
      "set title 'GPUs held over time ({})'\nset xlabel 'time (s)'\nset ylabel 'GPUs held'\n"
      "set key top left\nplot ",
      workload.gpu.name);
  std::string cdf_plot =
      "set terminal pngcairo size 1000,500\nset output 'latency_cdf.png'\n"
      "set title 'Request latency CDF'\nset xlabel 'latency (ms, log scale)'\n"
      "set ylabel 'fraction of requests'\nset logscale x\nset key bottom right\nset yrange "
      "[0:1]\nplot ";
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const std::string sep = i + 1 < reports.size() ? ", \\\n     " : "\n";
    gpus_plot += fmt::format("'gpus_{}.dat' using 1:2 with lines lw 2 title '{}'{}",
                             reports[i].policy, reports[i].policy, sep);
    cdf_plot += fmt::format("'latency_cdf.dat' index {} using 1:2 with lines lw 2 title '{}'{}", i,
                            reports[i].policy, sep);
  }
  GSHARE_RETURN_IF_ERROR(WriteTextFile(root / "gpus.gp", gpus_plot));
  GSHARE_RETURN_IF_ERROR(WriteTextFile(root / "latency_cdf.gp", cdf_plot));

  if (!HaveGnuplot()) {
    if (figures_note)
      *figures_note = "gnuplot is not installed: wrote gpus.gp and latency_cdf.gp, no PNGs";
    return Status::Ok();
  }
  GSHARE_RETURN_IF_ERROR(RenderGnuplot(root, {"gpus.gp", "latency_cdf.gp"}));
  if (figures_note) *figures_note = "figures: gpus.png, latency_cdf.png";
  return Status::Ok();
}

}  // namespace gshare
