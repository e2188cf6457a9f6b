#include "gshare/metrics/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

#include <fmt/format.h>

namespace gshare::metrics {
namespace {

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool IsUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t extra = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      code = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      code = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      code = c & 0x07u;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      code = (code << 6) | (cc & 0x3Fu);
    }
    static constexpr std::uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

bool IsFinite(double v) { return std::isfinite(v); }

// Atomic add on a double (compare-exchange: portable to libraries without fetch_add on floats).
void AtomicAdd(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}

}  // namespace

Status ValidateMetricName(std::string_view name) {
  if (name.empty()) return InvalidArgument("metric name is empty");
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = IsAsciiLetter(c) || c == '_' || c == ':' || (i > 0 && IsDigit(c));
    if (!ok) {
      return InvalidArgument(
          fmt::format("metric name '{}' is not of the form [a-zA-Z_:][a-zA-Z0-9_:]* (character {})",
                      name, i + 1));
    }
  }
  return Status::Ok();
}

Status ValidateLabelName(std::string_view name) {
  if (name.empty()) return InvalidArgument("label name is empty");
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = IsAsciiLetter(c) || c == '_' || (i > 0 && IsDigit(c));
    if (!ok) {
      return InvalidArgument(fmt::format(
          "label name '{}' is not of the form [a-zA-Z_][a-zA-Z0-9_]* (character {})", name, i + 1));
    }
  }
  if (name.starts_with("__")) {
    return InvalidArgument(
        fmt::format("label name '{}' starts with '__', which Prometheus reserves", name));
  }
  return Status::Ok();
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Integers below 2^53 are exact doubles: print every digit ("1000000", never "1e+06").
  constexpr double kExactLimit = 9007199254740992.0;  // 2^53
  if (value == std::trunc(value) && std::fabs(value) <= kExactLimit) {
    return fmt::format("{}", static_cast<std::int64_t>(value));
  }
  // The shortest text that reads back to the same double.
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (error != std::errc()) return fmt::format("{:.17g}", value);
  return std::string(buffer, end);
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Status Counter::Add(double amount) {
  if (!IsFinite(amount) || amount < 0) {
    return InvalidArgument(
        fmt::format("counter increment {} is not a finite number >= 0", FormatValue(amount)));
  }
  AtomicAdd(value_, amount);
  return Status::Ok();
}

Status Gauge::Set(double value) {
  if (!IsFinite(value)) {
    return InvalidArgument(fmt::format("gauge value {} is not finite", FormatValue(value)));
  }
  value_.store(value, std::memory_order_relaxed);
  return Status::Ok();
}

Status Gauge::Add(double delta) {
  if (!IsFinite(delta)) {
    return InvalidArgument(fmt::format("gauge change {} is not finite", FormatValue(delta)));
  }
  AtomicAdd(value_, delta);
  return Status::Ok();
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(upper_bounds_.size() + 1)) {}

Status Histogram::Observe(double value) {
  if (!IsFinite(value)) {
    return InvalidArgument(
        fmt::format("histogram observation {} is not finite", FormatValue(value)));
  }
  const auto it = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  buckets_[static_cast<std::size_t>(it - upper_bounds_.begin())].fetch_add(
      1, std::memory_order_relaxed);
  AtomicAdd(sum_, value);
  return Status::Ok();
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.cumulative.resize(upper_bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < s.cumulative.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type,
                       std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {}

Status FamilyBase::CheckLabelValues(std::span<const std::string_view> values) const {
  if (values.size() != label_names_.size()) {
    return InvalidArgument(fmt::format("metric '{}' has {} label(s), got {} value(s)", name_,
                                       label_names_.size(), values.size()));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!IsUtf8(values[i])) {
      return InvalidArgument(
          fmt::format("metric '{}': the value of label '{}' is not UTF-8", name_, label_names_[i]));
    }
  }
  return Status::Ok();
}

std::string FamilyBase::SeriesPrefix(std::string_view suffix,
                                     const std::vector<std::string>& values) const {
  std::string out = name_;
  out += suffix;
  if (!label_names_.empty()) {
    out += '{';
    for (std::size_t i = 0; i < label_names_.size(); ++i) {
      if (i > 0) out += ',';
      out += label_names_[i];
      out += "=\"";
      out += EscapeLabelValue(values[i]);
      out += '"';
    }
  }
  return out;
}

namespace {

// Closes a series prefix that may hold labels (`name{a="x"` or `name`) and writes its value.
void EndSample(std::string& out, std::string prefix, bool has_labels, double value) {
  out += prefix;
  if (has_labels) out += '}';
  out += ' ';
  out += FormatValue(value);
  out += '\n';
}

}  // namespace

template <typename T>
Result<std::shared_ptr<T>> Family<T>::WithLabels(std::span<const std::string_view> values) {
  GSHARE_RETURN_IF_ERROR(CheckLabelValues(values));
  std::vector<std::string> key(values.begin(), values.end());
  MutexLock lock(mutex_);
  auto it = children_.find(key);
  if (it == children_.end()) {
    std::shared_ptr<T> child;
    if constexpr (std::is_same_v<T, Histogram>) {
      child = std::make_shared<Histogram>(upper_bounds_);
    } else {
      child = std::make_shared<T>();
    }
    it = children_.emplace(std::move(key), std::move(child)).first;
  }
  return it->second;
}

template <typename T>
Status Family<T>::Remove(std::span<const std::string_view> values) {
  GSHARE_RETURN_IF_ERROR(CheckLabelValues(values));
  const std::vector<std::string> key(values.begin(), values.end());
  MutexLock lock(mutex_);
  if (children_.erase(key) == 0) {
    return NotFound(fmt::format("metric '{}' has no series with these label values", name()));
  }
  return Status::Ok();
}

template <typename T>
std::size_t Family<T>::size() const {
  MutexLock lock(mutex_);
  return children_.size();
}

template <typename T>
void Family<T>::Write(std::string& out) const {
  MutexLock lock(mutex_);
  if (children_.empty()) return;
  out += "# HELP ";
  out += name();
  out += ' ';
  out += EscapeHelp(help());
  out += "\n# TYPE ";
  out += name();
  out += ' ';
  out += MetricTypeName(type());
  out += '\n';
  const bool has_labels = !label_names().empty();
  for (const auto& [values, child] : children_) {
    if constexpr (std::is_same_v<T, Histogram>) {
      const Histogram::Snapshot s = child->Read();
      const std::vector<double>& bounds = child->upper_bounds();
      for (std::size_t i = 0; i < s.cumulative.size(); ++i) {
        std::string prefix = SeriesPrefix("_bucket", values);
        prefix += has_labels ? ",le=\"" : "{le=\"";
        prefix += i < bounds.size() ? FormatValue(bounds[i]) : "+Inf";
        prefix += '"';
        EndSample(out, std::move(prefix), true, static_cast<double>(s.cumulative[i]));
      }
      EndSample(out, SeriesPrefix("_sum", values), has_labels, s.sum);
      EndSample(out, SeriesPrefix("_count", values), has_labels, static_cast<double>(s.count));
    } else {
      EndSample(out, SeriesPrefix("", values), has_labels, child->value());
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Registry::Registry(std::string required_prefix) : required_prefix_(std::move(required_prefix)) {}

Status Registry::Admit(std::string_view name, std::string_view help, MetricType type,
                       const std::vector<std::string>& label_names) {
  GSHARE_RETURN_IF_ERROR(ValidateMetricName(name));
  if (!name.starts_with(required_prefix_)) {
    return InvalidArgument(
        fmt::format("metric name '{}' does not start with '{}'", name, required_prefix_));
  }
  if (name.size() == required_prefix_.size()) {
    return InvalidArgument(fmt::format("metric name '{}' is only the prefix", name));
  }
  const bool total = EndsWith(name, "_total");
  if (type == MetricType::kCounter && !total) {
    return InvalidArgument(fmt::format("counter name '{}' does not end with '_total'", name));
  }
  if (type != MetricType::kCounter) {
    for (const std::string_view suffix : {"_total", "_bucket", "_sum", "_count"}) {
      if (EndsWith(name, suffix)) {
        return InvalidArgument(
            fmt::format("{} name '{}' ends with '{}', which belongs to another "
                        "type's samples",
                        MetricTypeName(type), name, suffix));
      }
    }
  }
  if (help.empty()) return InvalidArgument(fmt::format("metric '{}' has no HELP text", name));
  if (!IsUtf8(help)) return InvalidArgument(fmt::format("HELP of metric '{}' is not UTF-8", name));
  std::set<std::string_view> seen;
  for (const std::string& label : label_names) {
    Status s = ValidateLabelName(label);
    if (!s.ok()) return s.WithContext(fmt::format("metric '{}'", name));
    if (type == MetricType::kHistogram && label == "le") {
      return InvalidArgument(
          fmt::format("histogram '{}' has a label named 'le', which its buckets use", name));
    }
    if (!seen.insert(label).second) {
      return InvalidArgument(fmt::format("metric '{}' names label '{}' twice", name, label));
    }
  }
  std::vector<std::string> samples;
  if (type == MetricType::kHistogram) {
    for (const std::string_view suffix : {"", "_bucket", "_sum", "_count"}) {
      samples.push_back(fmt::format("{}{}", name, suffix));
    }
  } else {
    samples.emplace_back(name);
  }
  for (const std::string& sample : samples) {
    if (sample_names_.contains(sample)) {
      return AlreadyExists(fmt::format("metric name '{}' is taken", sample));
    }
  }
  sample_names_.insert(samples.begin(), samples.end());
  return Status::Ok();
}

Result<CounterFamily*> Registry::AddCounter(std::string_view name, std::string_view help,
                                            std::vector<std::string> label_names) {
  MutexLock lock(mutex_);
  GSHARE_RETURN_IF_ERROR(Admit(name, help, MetricType::kCounter, label_names));
  auto family = std::make_unique<CounterFamily>(std::string(name), std::string(help),
                                                MetricType::kCounter, std::move(label_names));
  CounterFamily* raw = family.get();
  if (raw->label_names().empty()) (void)raw->WithLabels(std::span<const std::string_view>());
  families_.push_back(std::move(family));
  return raw;
}

Result<GaugeFamily*> Registry::AddGauge(std::string_view name, std::string_view help,
                                        std::vector<std::string> label_names) {
  MutexLock lock(mutex_);
  GSHARE_RETURN_IF_ERROR(Admit(name, help, MetricType::kGauge, label_names));
  auto family = std::make_unique<GaugeFamily>(std::string(name), std::string(help),
                                              MetricType::kGauge, std::move(label_names));
  GaugeFamily* raw = family.get();
  if (raw->label_names().empty()) (void)raw->WithLabels(std::span<const std::string_view>());
  families_.push_back(std::move(family));
  return raw;
}

Result<HistogramFamily*> Registry::AddHistogram(std::string_view name, std::string_view help,
                                                std::vector<std::string> label_names,
                                                std::vector<double> upper_bounds) {
  if (upper_bounds.empty()) {
    return InvalidArgument(fmt::format("histogram '{}' has no bucket bounds", name));
  }
  for (std::size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!IsFinite(upper_bounds[i])) {
      return InvalidArgument(fmt::format(
          "histogram '{}': bucket bound {} is not finite (+Inf is implicit)", name, i + 1));
    }
    if (i > 0 && !(upper_bounds[i] > upper_bounds[i - 1])) {
      return InvalidArgument(
          fmt::format("histogram '{}': bucket bounds are not strictly increasing at {}", name,
                      FormatValue(upper_bounds[i])));
    }
  }
  MutexLock lock(mutex_);
  GSHARE_RETURN_IF_ERROR(Admit(name, help, MetricType::kHistogram, label_names));
  auto family = std::make_unique<HistogramFamily>(std::string(name), std::string(help),
                                                  MetricType::kHistogram, std::move(label_names),
                                                  std::move(upper_bounds));
  HistogramFamily* raw = family.get();
  if (raw->label_names().empty()) (void)raw->WithLabels(std::span<const std::string_view>());
  families_.push_back(std::move(family));
  return raw;
}

std::string Registry::Expose() const {
  std::string out;
  MutexLock lock(mutex_);
  for (const auto& family : families_) family->Write(out);
  return out;
}

}  // namespace gshare::metrics
