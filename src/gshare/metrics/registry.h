// Registry: counters, gauges and histograms, exposed in the Prometheus text format 0.0.4.
//
// A family is one metric (a name, a HELP text, a type and label names); its children are the
// series, one per tuple of label values. The registry owns its families: the pointers it hands
// out stay valid as long as the registry lives. Children are shared: a caller keeps the
// std::shared_ptr that WithLabels returns and updates it on the request path without any lookup;
// Remove drops a child from the exposition (a deleted function's series), and a caller still
// holding it may keep updating it, to no effect on the output.
//
// Names are checked at registration: the Prometheus metric-name and label-name grammars, the
// registry's required prefix ("gshare_" for the project's own metrics), "_total" at the end of
// every counter's name and of no other type's, no label named "le" on a histogram, and no label
// name starting with "__" (reserved by Prometheus). Errors are InvalidArgument (AlreadyExists for
// a name taken), with a message that names the metric.
//
// Thread-safety: everything is thread-safe. Updating a child is lock-free (one atomic
// read-modify-write per counter or gauge update; a histogram observation is an atomic increment
// of its bucket plus an atomic add to its sum). Each family has a mutex guarding its set of
// children, taken by WithLabels, Remove and exposition; the registry's mutex guards the list of
// families. A scrape that runs during updates sees each series at some instant between them; a
// histogram's _count is the sum of its buckets, so the two always agree.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"

namespace gshare::metrics {

// The metric-name grammar [a-zA-Z_:][a-zA-Z0-9_:]*.
Status ValidateMetricName(std::string_view name);
// The label-name grammar [a-zA-Z_][a-zA-Z0-9_]*, without the reserved "__" prefix.
Status ValidateLabelName(std::string_view name);

// A sample value as the exposition writes it: integers (up to 2^53 in magnitude) as exact
// digits, other finite values in the shortest form that reads back to the same double, and
// "NaN", "+Inf", "-Inf".
std::string FormatValue(double value);
// A label value between double quotes: backslash, double quote and newline escaped.
std::string EscapeLabelValue(std::string_view value);
// A HELP text: backslash and newline escaped.
std::string EscapeHelp(std::string_view help);

// A monotonically increasing value. Starts at 0.
class Counter {
 public:
  void Inc() { value_.fetch_add(1.0, std::memory_order_relaxed); }
  // Adds `amount`, which must be finite and >= 0 (InvalidArgument otherwise, nothing added).
  Status Add(double amount);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down. Starts at 0; holds finite values only.
class Gauge {
 public:
  // Sets the value; `value` must be finite (InvalidArgument otherwise, nothing changed).
  Status Set(double value);
  // Adds `delta` (finite, either sign).
  Status Add(double delta);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted in fixed buckets (upper bounds, inclusive), with their sum.
class Histogram {
 public:
  // `upper_bounds` are strictly increasing and finite (checked by the family); +Inf is implicit.
  explicit Histogram(std::vector<double> upper_bounds);

  // Counts `value` (finite; InvalidArgument otherwise) in the first bucket whose bound is >= it.
  Status Observe(double value);

  struct Snapshot {
    std::vector<std::uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
    std::uint64_t count = 0;  // == cumulative.back()
  };
  Snapshot Read() const;
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // upper_bounds_.size() + 1
  std::atomic<double> sum_{0.0};
};

enum class MetricType : std::uint8_t { kCounter, kGauge, kHistogram };
std::string_view MetricTypeName(MetricType type);

// What every family shares: its name, HELP, type, label names and its exposition.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Appends this family in the text format: HELP, TYPE and every child in label-value order.
  // A family with label names and no child yet writes nothing.
  virtual void Write(std::string& out) const = 0;

 protected:
  // InvalidArgument unless `values` has one UTF-8 value per label name.
  Status CheckLabelValues(std::span<const std::string_view> values) const;
  // `name{a="x",b="y"` (no closing brace) or just `name` when there are no labels and no extra.
  std::string SeriesPrefix(std::string_view suffix, const std::vector<std::string>& values) const;

 private:
  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<std::string> label_names_;
};

// A family of children of type T (Counter, Gauge or Histogram).
template <typename T>
class Family final : public FamilyBase {
 public:
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::vector<double> upper_bounds = {})
      : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
        upper_bounds_(std::move(upper_bounds)) {}

  // The child for `values` (one per label name, in order), created on first use. Allocates and
  // locks the family: call it once per series and keep the child.
  Result<std::shared_ptr<T>> WithLabels(std::span<const std::string_view> values);
  Result<std::shared_ptr<T>> WithLabels(std::initializer_list<std::string_view> values) {
    return WithLabels(std::span<const std::string_view>(values.begin(), values.size()));
  }
  // Drops the child for `values` from the exposition; NotFound when there is none.
  Status Remove(std::span<const std::string_view> values);
  Status Remove(std::initializer_list<std::string_view> values) {
    return Remove(std::span<const std::string_view>(values.begin(), values.size()));
  }
  std::size_t size() const;

  void Write(std::string& out) const override;

 private:
  std::vector<double> upper_bounds_;  // histograms only
  mutable Mutex mutex_;
  std::map<std::vector<std::string>, std::shared_ptr<T>> children_ GUARDED_BY(mutex_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

class Registry {
 public:
  // Every metric name must start with `required_prefix` (empty: no requirement).
  explicit Registry(std::string required_prefix = "gshare_");

  // Registers a family. A family without label names gets its one child at once, so it is
  // exposed (at 0) from the start. The returned pointer lives as long as the registry.
  Result<CounterFamily*> AddCounter(std::string_view name, std::string_view help,
                                    std::vector<std::string> label_names = {});
  Result<GaugeFamily*> AddGauge(std::string_view name, std::string_view help,
                                std::vector<std::string> label_names = {});
  // `upper_bounds`: at least one, finite, strictly increasing; the +Inf bucket is implicit.
  Result<HistogramFamily*> AddHistogram(std::string_view name, std::string_view help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> upper_bounds);

  // The whole registry in the text format 0.0.4 (content type
  // "text/plain; version=0.0.4; charset=utf-8"), families in registration order.
  std::string Expose() const;

  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  // Checks a new family's names; on success reserves the sample names it will write.
  Status Admit(std::string_view name, std::string_view help, MetricType type,
               const std::vector<std::string>& label_names) REQUIRES(mutex_);

  std::string required_prefix_;
  mutable Mutex mutex_;
  std::vector<std::unique_ptr<FamilyBase>> families_ GUARDED_BY(mutex_);
  std::set<std::string, std::less<>> sample_names_ GUARDED_BY(mutex_);
};

}  // namespace gshare::metrics
