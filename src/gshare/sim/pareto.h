// The report of `gshare compare`: each policy's knob settings as points (SLO attainment against
// GPU-seconds and cost), means and 95% intervals over seeds, the Pareto front, and the point each
// policy is judged by at equal SLO.
//
// pareto.json follows this contract (docs/evaluation.md, "Comparing at equal SLO"):
//   {"slo_target": float,
//    "policies": {"<name>": [{"knobs": {"<knob>": str}, "slo_attainment": float,
//                             "gpu_seconds": float, "cost_usd": float, "p99_ms": float,
//                             "utilisation": float,
//                             "ci95": {"slo_attainment": [lo, hi], "gpu_seconds": [lo, hi],
//                                      "cost_usd": [lo, hi]}}]},     (ci95 only with 2+ seeds)
//    "at_equal_slo": {"slo": float, "gpu_seconds": {"<name>": float|null},
//                     "cost_usd": {"<name>": float|null}}}
// Every point swept is listed, in grid order. It holds no wall-clock figure: the same inputs give
// a byte-identical file.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gshare/common/status.h"

namespace gshare {

// What one run (a policy at one knob setting, one seed) gave.
struct RunFigures {
  double slo_attainment = 0;
  double gpu_seconds = 0;
  double cost_usd = 0;
  double p99_ms = 0;
  double utilisation = 0;  // the trace's compute GPU-seconds / gpu_seconds
};

struct Interval {
  double lo = 0;
  double hi = 0;
};

// The 0.975 quantile of Student's t distribution with `df` >= 1 degrees of freedom: the factor of
// a two-sided 95% interval (12.706 for df = 1, 2.262 for df = 9, toward 1.960).
double StudentT975(int df);

// The two-sided 95% Student t interval of the mean of `samples` (at least two): mean -/+
// StudentT975(n - 1) x s / sqrt(n), s the sample standard deviation (n - 1 in the denominator).
Interval MeanInterval95(const std::vector<double>& samples);

// One knob setting of one policy, over every seed.
struct ComparePoint {
  std::vector<std::pair<std::string, std::string>> knobs;  // (knob, value as typed), grid order
  RunFigures mean;                                         // means over the seeds
  // With two or more seeds: 95% intervals of the means; attainment kept within [0, 1] and
  // GPU-seconds and cost at 0 or above (the interval of a mean that cannot leave them).
  std::optional<Interval> ci_slo_attainment;
  std::optional<Interval> ci_gpu_seconds;
  std::optional<Interval> ci_cost_usd;
  bool pareto = false;  // no other point of its policy has at least its attainment at fewer
                        // GPU-seconds, or more attainment at no more GPU-seconds
};

// The point of `runs` (one per seed; at least one): means, and intervals when there are 2+.
ComparePoint AggregateRuns(std::vector<std::pair<std::string, std::string>> knobs,
                           const std::vector<RunFigures>& runs);

// The point a policy is judged by at an SLO target: among the points whose mean attainment is at
// least `slo_target`, the one with the lowest mean cost (ties: the higher attainment, then the
// first in grid order). nullopt when no point reaches the target.
std::optional<std::size_t> ChooseAtSlo(const std::vector<ComparePoint>& points, double slo_target);

// Sets `pareto` on each of `points` (one policy's).
void MarkParetoFront(std::vector<ComparePoint>& points);

struct PolicyPoints {
  std::string policy;
  std::vector<ComparePoint> points;
  std::optional<std::size_t> chosen;  // ChooseAtSlo
};

// What the table's heading says of the runs.
struct CompareInfo {
  std::string trace_path;
  std::string trace_format;
  std::string gpu_type;
  std::size_t requests = 0;
  std::size_t functions = 0;
  int seeds = 1;
  double warmup_seconds = 0;
  std::string exec_noise = "none";
};

struct CompareSummary {
  double slo_target = 0.99;
  std::string world = "ideal";  // WorldModel::Describe of every run
  std::vector<PolicyPoints> policies;
};

// Marks each policy's Pareto front and chooses its point at summary.slo_target.
void SelectAtSlo(CompareSummary& summary);

// pareto.json (2-space indent, trailing newline).
std::string ParetoJson(const CompareSummary& summary);
// pareto.csv: one row per point, with its pareto and chosen marks (and intervals with 2+ seeds).
std::string ParetoCsv(const CompareSummary& summary);
// The table printed on stdout: per policy its Pareto points, then the point chosen at equal SLO.
std::string ParetoTable(const CompareInfo& info, const CompareSummary& summary);

// Writes pareto.json, pareto.csv, pareto.dat and pareto.gp into `dir` (created if missing), then
// renders pareto.png (GPU-seconds against attainment, one curve per policy: its Pareto front,
// its other points as dots) when gnuplot is installed; `figures_note` says which. Errors: the
// directory or a file cannot be written, gnuplot fails.
Status WriteParetoReports(const std::string& dir, const CompareInfo& info,
                          const CompareSummary& summary, std::string* figures_note);

}  // namespace gshare
