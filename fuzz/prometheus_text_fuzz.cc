// Fuzz target: the reader of the Prometheus text format. Whatever parses, written back as the
// registry writes (its value and label-value formatting), must parse back to the same samples.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gshare/metrics/prometheus_text.h"
#include "gshare/metrics/registry.h"

namespace {

bool SameValue(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto samples = gshare::metrics::ParsePrometheusText(text);
  if (!samples.ok()) {
    if (samples.status().code() != gshare::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  std::string written;
  for (const gshare::metrics::Sample& sample : *samples) {
    written += sample.name;
    if (!sample.labels.empty()) {
      written += '{';
      for (const auto& [name, value] : sample.labels) {
        written += name + "=\"" + gshare::metrics::EscapeLabelValue(value) + "\",";
      }
      written.back() = '}';
    }
    written += " " + gshare::metrics::FormatValue(sample.value);
    if (sample.timestamp_ms) written += " " + std::to_string(*sample.timestamp_ms);
    written += "\n";
  }
  const auto again = gshare::metrics::ParsePrometheusText(written);
  if (!again.ok() || again->size() != samples->size()) __builtin_trap();
  for (std::size_t i = 0; i < samples->size(); ++i) {
    const auto& a = (*samples)[i];
    const auto& b = (*again)[i];
    if (a.name != b.name || a.labels != b.labels || !SameValue(a.value, b.value) ||
        a.timestamp_ms != b.timestamp_ms) {
      __builtin_trap();
    }
  }
  return 0;
}
