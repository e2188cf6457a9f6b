#include "gshare/sim/pareto.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gshare/sim/figures.h"

namespace gshare {
namespace {

using Json = nlohmann::ordered_json;

// The continued fraction of the regularized incomplete beta function (modified Lentz).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  const auto guard = [](double v) { return std::fabs(v) < kTiny ? kTiny : v; };
  double c = 1;
  double d = 1 / guard(1 - (a + b) * x / (a + 1));
  double h = d;
  for (int m = 1; m <= 1000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a - 1 + m2) * (a + m2));
    d = 1 / guard(1 + aa * d);
    c = guard(1 + aa / c);
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2));
    d = 1 / guard(1 + aa * d);
    c = guard(1 + aa / c);
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < 1e-15) break;
  }
  return h;
}

// I_x(a, b), the regularized incomplete beta function, for x in [0, 1].
double IncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

std::string KnobText(const ComparePoint& point, std::string_view separator) {
  std::string out;
  for (const auto& [knob, value] : point.knobs) {
    out += fmt::format("{}{}={}", out.empty() ? "" : separator, knob, value);
  }
  return out;
}

Json IntervalJson(const Interval& interval) { return Json::array({interval.lo, interval.hi}); }

// The points of a policy on its Pareto front, cheapest first.
std::vector<const ComparePoint*> FrontByGpuSeconds(const PolicyPoints& policy) {
  std::vector<const ComparePoint*> front;
  for (const ComparePoint& point : policy.points) {
    if (point.pareto) front.push_back(&point);
  }
  std::stable_sort(front.begin(), front.end(), [](const ComparePoint* a, const ComparePoint* b) {
    if (a->mean.gpu_seconds != b->mean.gpu_seconds) {
      return a->mean.gpu_seconds < b->mean.gpu_seconds;
    }
    return a->mean.slo_attainment < b->mean.slo_attainment;
  });
  return front;
}

bool HasIntervals(const CompareSummary& summary) {
  for (const PolicyPoints& policy : summary.policies) {
    for (const ComparePoint& point : policy.points) {
      if (point.ci_slo_attainment) return true;
    }
  }
  return false;
}

}  // namespace

double StudentT975(int df) {
  // Two-sided tail P(|T| > t) = I_{df / (df + t^2)}(df / 2, 1 / 2); bisect for a tail of 0.05.
  const double n = std::max(df, 1);
  double lo = 0;
  double hi = 100;  // the tail at 100 is below 0.05 for every df >= 1
  for (int i = 0; i < 200; ++i) {
    const double t = (lo + hi) / 2;
    const double tail = IncompleteBeta(n / 2, 0.5, n / (n + t * t));
    (tail > 0.05 ? lo : hi) = t;
  }
  return (lo + hi) / 2;
}

Interval MeanInterval95(const std::vector<double>& samples) {
  const double n = static_cast<double>(samples.size());
  double sum = 0;
  for (const double v : samples) sum += v;
  const double mean = samples.empty() ? 0 : sum / n;
  if (samples.size() < 2) return {mean, mean};
  double squares = 0;
  for (const double v : samples) squares += (v - mean) * (v - mean);
  const double half = StudentT975(static_cast<int>(samples.size()) - 1) *
                      std::sqrt(squares / (n - 1)) / std::sqrt(n);
  return {mean - half, mean + half};
}

ComparePoint AggregateRuns(std::vector<std::pair<std::string, std::string>> knobs,
                           const std::vector<RunFigures>& runs) {
  ComparePoint point;
  point.knobs = std::move(knobs);
  std::vector<double> attainment, gpu_seconds, cost, p99, utilisation;
  for (const RunFigures& run : runs) {
    attainment.push_back(run.slo_attainment);
    gpu_seconds.push_back(run.gpu_seconds);
    cost.push_back(run.cost_usd);
    p99.push_back(run.p99_ms);
    utilisation.push_back(run.utilisation);
  }
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (const double x : v) sum += x;
    return v.empty() ? 0 : sum / static_cast<double>(v.size());
  };
  point.mean = {mean(attainment), mean(gpu_seconds), mean(cost), mean(p99), mean(utilisation)};
  if (runs.size() >= 2) {
    const auto within = [](Interval i, double lo, double hi) {
      return Interval{std::clamp(i.lo, lo, hi), std::clamp(i.hi, lo, hi)};
    };
    const double kNoLimit = HUGE_VAL;
    point.ci_slo_attainment = within(MeanInterval95(attainment), 0, 1);
    point.ci_gpu_seconds = within(MeanInterval95(gpu_seconds), 0, kNoLimit);
    point.ci_cost_usd = within(MeanInterval95(cost), 0, kNoLimit);
  }
  return point;
}

std::optional<std::size_t> ChooseAtSlo(const std::vector<ComparePoint>& points, double slo_target) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const RunFigures& p = points[i].mean;
    if (!(p.slo_attainment >= slo_target)) continue;
    if (best) {
      const RunFigures& b = points[*best].mean;
      if (p.cost_usd > b.cost_usd) continue;
      if (p.cost_usd == b.cost_usd && p.slo_attainment <= b.slo_attainment) continue;
    }
    best = i;
  }
  return best;
}

void MarkParetoFront(std::vector<ComparePoint>& points) {
  for (ComparePoint& p : points) {
    p.pareto = std::none_of(points.begin(), points.end(), [&](const ComparePoint& q) {
      const bool no_worse = q.mean.slo_attainment >= p.mean.slo_attainment &&
                            q.mean.gpu_seconds <= p.mean.gpu_seconds;
      const bool better =
          q.mean.slo_attainment > p.mean.slo_attainment || q.mean.gpu_seconds < p.mean.gpu_seconds;
      return no_worse && better;
    });
  }
}

void SelectAtSlo(CompareSummary& summary) {
  for (PolicyPoints& policy : summary.policies) {
    MarkParetoFront(policy.points);
    policy.chosen = ChooseAtSlo(policy.points, summary.slo_target);
  }
}

std::string ParetoJson(const CompareSummary& summary) {
  Json doc;
  doc["slo_target"] = summary.slo_target;
  doc["world"] = summary.world;
  Json policies = Json::object();
  Json gpu_seconds = Json::object();
  Json cost = Json::object();
  for (const PolicyPoints& policy : summary.policies) {
    Json points = Json::array();
    for (const ComparePoint& point : policy.points) {
      Json p;
      Json knobs = Json::object();
      for (const auto& [knob, value] : point.knobs) knobs[knob] = value;
      p["knobs"] = knobs;
      p["slo_attainment"] = point.mean.slo_attainment;
      p["gpu_seconds"] = point.mean.gpu_seconds;
      p["cost_usd"] = point.mean.cost_usd;
      p["p99_ms"] = point.mean.p99_ms;
      p["utilisation"] = point.mean.utilisation;
      if (point.ci_slo_attainment) {
        p["ci95"] = {{"slo_attainment", IntervalJson(*point.ci_slo_attainment)},
                     {"gpu_seconds", IntervalJson(*point.ci_gpu_seconds)},
                     {"cost_usd", IntervalJson(*point.ci_cost_usd)}};
      }
      points.push_back(p);
    }
    policies[policy.policy] = points;
    if (policy.chosen) {
      gpu_seconds[policy.policy] = policy.points[*policy.chosen].mean.gpu_seconds;
      cost[policy.policy] = policy.points[*policy.chosen].mean.cost_usd;
    } else {
      gpu_seconds[policy.policy] = nullptr;
      cost[policy.policy] = nullptr;
    }
  }
  doc["policies"] = policies;
  doc["at_equal_slo"] = {
      {"slo", summary.slo_target}, {"gpu_seconds", gpu_seconds}, {"cost_usd", cost}};
  return doc.dump(2) + "\n";
}

std::string ParetoCsv(const CompareSummary& summary) {
  const bool intervals = HasIntervals(summary);
  std::string out =
      "policy,knobs,slo_attainment,gpu_seconds,cost_usd,p99_ms,utilisation,pareto,chosen";
  if (intervals) {
    out +=
        ",slo_attainment_lo,slo_attainment_hi,gpu_seconds_lo,gpu_seconds_hi,cost_usd_lo,"
        "cost_usd_hi";
  }
  out += "\n";
  for (const PolicyPoints& policy : summary.policies) {
    for (std::size_t i = 0; i < policy.points.size(); ++i) {
      const ComparePoint& p = policy.points[i];
      out += fmt::format("{},{},{:.6f},{:.3f},{:.4f},{:.4f},{:.6f},{},{}", policy.policy,
                         KnobText(p, ";"), p.mean.slo_attainment, p.mean.gpu_seconds,
                         p.mean.cost_usd, p.mean.p99_ms, p.mean.utilisation, p.pareto ? 1 : 0,
                         policy.chosen == i ? 1 : 0);
      if (intervals && p.ci_slo_attainment) {
        out += fmt::format(",{:.6f},{:.6f},{:.3f},{:.3f},{:.4f},{:.4f}", p.ci_slo_attainment->lo,
                           p.ci_slo_attainment->hi, p.ci_gpu_seconds->lo, p.ci_gpu_seconds->hi,
                           p.ci_cost_usd->lo, p.ci_cost_usd->hi);
      } else if (intervals) {
        out += ",,,,,,";
      }
      out += "\n";
    }
  }
  return out;
}

std::string ParetoTable(const CompareInfo& info, const CompareSummary& summary) {
  std::string out = fmt::format(
      "trace {} ({}): {} requests, {} functions; GPU type {}; seeds {}; warm-up {:.0f} s; "
      "execution noise {}; world {}\n",
      info.trace_path, info.trace_format, info.requests, info.functions, info.gpu_type,
      info.seeds == 1 ? std::string("1") : fmt::format("1..{}", info.seeds), info.warmup_seconds,
      info.exec_noise, summary.world);
  std::size_t knob_width = 10;
  for (const PolicyPoints& policy : summary.policies) {
    for (const ComparePoint& point : policy.points) {
      knob_width = std::max(knob_width, KnobText(point, " ").size());
    }
  }
  const auto knobs = [&](const ComparePoint& point) {
    const std::string text = KnobText(point, " ");
    return text.empty() ? std::string("(defaults)") : text;
  };
  const bool intervals = HasIntervals(summary);
  out += "\nPareto points (SLO attainment against GPU-seconds; every point is in pareto.csv):\n";
  out += fmt::format("{:<20} {:<{}} {:>8} {:>11} {:>6} {:>10} {:>9}", "policy", "knobs", knob_width,
                     "SLO met", "GPU-s", "util", "cost USD", "p99 ms");
  if (intervals) out += fmt::format("  {:<18} {}", "SLO met 95% CI", "GPU-s 95% CI");
  out += "\n";
  for (const PolicyPoints& policy : summary.policies) {
    for (const ComparePoint* p : FrontByGpuSeconds(policy)) {
      out += fmt::format("{:<20} {:<{}} {:>7.2f}% {:>11.1f} {:>5.1f}% {:>10.2f} {:>9.2f}",
                         policy.policy, knobs(*p), knob_width, 100 * p->mean.slo_attainment,
                         p->mean.gpu_seconds, 100 * p->mean.utilisation, p->mean.cost_usd,
                         p->mean.p99_ms);
      if (p->ci_slo_attainment) {
        out += fmt::format("  {:<18} {:.1f}-{:.1f}",
                           fmt::format("{:.2f}-{:.2f}%", 100 * p->ci_slo_attainment->lo,
                                       100 * p->ci_slo_attainment->hi),
                           p->ci_gpu_seconds->lo, p->ci_gpu_seconds->hi);
      }
      out += "\n";
    }
  }
  out +=
      fmt::format("\nAt equal SLO (each policy's cheapest point with SLO attainment >= {:.2f}%):\n",
                  100 * summary.slo_target);
  out += fmt::format("{:<20} {:<{}} {:>8} {:>11} {:>6} {:>10} {:>9}\n", "policy", "knobs",
                     knob_width, "SLO met", "GPU-s", "util", "cost USD", "p99 ms");
  for (const PolicyPoints& policy : summary.policies) {
    if (policy.chosen) {
      const ComparePoint& p = policy.points[*policy.chosen];
      out +=
          fmt::format("{:<20} {:<{}} {:>7.2f}% {:>11.1f} {:>5.1f}% {:>10.2f} {:>9.2f}\n",
                      policy.policy, knobs(p), knob_width, 100 * p.mean.slo_attainment,
                      p.mean.gpu_seconds, 100 * p.mean.utilisation, p.mean.cost_usd, p.mean.p99_ms);
      continue;
    }
    double best = 0;
    for (const ComparePoint& p : policy.points) best = std::max(best, p.mean.slo_attainment);
    out += fmt::format("{:<20} none of its {} points reaches it (best: {:.2f}%)\n", policy.policy,
                       policy.points.size(), 100 * best);
  }
  return out;
}

Status WriteParetoReports(const std::string& dir, const CompareInfo& info,
                          const CompareSummary& summary, std::string* figures_note) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("cannot create output directory {}: {}", dir, ec.message()));
  const fs::path root(dir);
  GSHARE_RETURN_IF_ERROR(WriteTextFile(root / "pareto.json", ParetoJson(summary)));
  GSHARE_RETURN_IF_ERROR(WriteTextFile(root / "pareto.csv", ParetoCsv(summary)));

  // Two blocks per policy: every point, then its Pareto front by attainment.
  std::string data = "# slo_attainment gpu_seconds (per policy: every point, then its front)\n";
  double x_min = summary.slo_target;
  double x_max = summary.slo_target;
  double y_min = HUGE_VAL;
  double y_max = 0;
  for (const PolicyPoints& policy : summary.policies) {
    data += fmt::format("# {}: every point\n", policy.policy);
    for (const ComparePoint& p : policy.points) {
      data += fmt::format("{:.6f} {:.3f}\n", p.mean.slo_attainment, p.mean.gpu_seconds);
      x_min = std::min(x_min, p.mean.slo_attainment);
      x_max = std::max(x_max, p.mean.slo_attainment);
      y_min = std::min(y_min, p.mean.gpu_seconds);
      y_max = std::max(y_max, p.mean.gpu_seconds);
    }
    data += fmt::format("\n\n# {}: Pareto front\n", policy.policy);
    for (const ComparePoint* p : FrontByGpuSeconds(policy)) {
      data += fmt::format("{:.6f} {:.3f}\n", p->mean.slo_attainment, p->mean.gpu_seconds);
    }
    data += "\n\n";
  }
  GSHARE_RETURN_IF_ERROR(WriteTextFile(root / "pareto.dat", data));

  const double pad = std::max(0.002, (x_max - x_min) * 0.05);
  std::string plot = fmt::format(
      "set terminal pngcairo size 1000,600\nset output 'pareto.png'\n"
      "set title 'GPU-seconds against SLO attainment, one curve per policy ({}; dashed: target "
      "{:.2f}%)'\nset xlabel 'SLO attainment (%)'\nset ylabel 'GPU-seconds'\nset key top left\n"
      "set xrange [{:.4f}:{:.4f}]\n"
      "set arrow from {:.4f}, graph 0 to {:.4f}, graph 1 nohead dashtype 2 lc rgb 'gray40'\nplot ",
      info.gpu_type, 100 * summary.slo_target, 100 * (x_min - pad),
      100 * std::min(1.0 + pad / 4, x_max + pad), 100 * summary.slo_target,
      100 * summary.slo_target);
  for (std::size_t i = 0; i < summary.policies.size(); ++i) {
    const std::string& name = summary.policies[i].policy;
    plot += fmt::format(
        "'pareto.dat' index {} using ($1*100):2 with linespoints lw 2 pt 7 lc {} title '{}', \\\n"
        "     'pareto.dat' index {} using ($1*100):2 with points pt 6 lc {} notitle{}",
        2 * i + 1, i + 1, name, 2 * i, i + 1,
        i + 1 < summary.policies.size() ? ", \\\n     " : "\n");
  }
  // Over a decade or more of GPU-seconds a log scale keeps the cheap points apart (only where
  // every point has some: a log scale drops zeros).
  if (y_min > 0 && y_max > 10 * y_min) {
    plot.insert(plot.rfind("plot "), "set logscale y\nset ylabel 'GPU-seconds (log scale)'\n");
  }
  GSHARE_RETURN_IF_ERROR(WriteTextFile(root / "pareto.gp", plot));

  if (!HaveGnuplot()) {
    if (figures_note) *figures_note = "gnuplot is not installed: wrote pareto.gp, no PNG";
    return Status::Ok();
  }
  GSHARE_RETURN_IF_ERROR(RenderGnuplot(root, {"pareto.gp"}));
  if (figures_note) *figures_note = "figure: pareto.png";
  return Status::Ok();
}

}  // namespace gshare
