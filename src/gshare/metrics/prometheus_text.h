// Reading the Prometheus text format 0.0.4: what a client of `/metrics` (gshare replay) needs to
// take counters from a server's exposition, the reverse of registry.h's writing.
//
// The parser takes text from anyone and either returns every sample, or InvalidArgument naming
// the line and what is wrong with it. It reads lines separated by '\n' (a '\r' before it is
// dropped); skips blank lines and every line whose first non-blank character is '#' (HELP, TYPE
// and other comments: the samples carry all a sum needs); and reads each other line as
//   name [ '{' [ label '=' '"' value '"' { ',' label '=' '"' value '"' } [ ','] ] '}' ] value
//   [ timestamp ]
// with blanks (spaces, tabs) allowed between the tokens. Names follow the metric-name and
// label-name grammars; a label name appears once per sample; label values unescape \\, \" and
// \n (any other escape is an error); values are Go-style floats (decimal or exponent, NaN, +Inf,
// -Inf, Inf, a leading '+' allowed); a timestamp is an integer of milliseconds. The work is
// linear in the text; nothing it allocates outgrows the text.
//
// Free functions without shared state: safe from any thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gshare/common/status.h"

namespace gshare::metrics {

struct Sample {
  std::string name;  // "gshare_swaps_total", or a histogram's "..._bucket"
  std::vector<std::pair<std::string, std::string>> labels;  // as written, values unescaped
  double value = 0;
  std::optional<std::int64_t> timestamp_ms;

  // The value of the label `label_name`, or nullopt when the sample has none.
  std::optional<std::string_view> Label(std::string_view label_name) const;
};

// Every sample of `text`, in order. Errors: InvalidArgument "line N: ...".
Result<std::vector<Sample>> ParsePrometheusText(std::string_view text);

// A label that a sample must carry with this value.
using LabelMatch = std::pair<std::string_view, std::string_view>;

// The sum of the values of the samples named `name` whose labels include every pair of `match`,
// or nullopt when no sample matches (a series not exposed differs from a series at 0 only in
// that).
std::optional<double> SumSamples(std::span<const Sample> samples, std::string_view name,
                                 std::span<const LabelMatch> match = {});
inline std::optional<double> SumSamples(std::span<const Sample> samples, std::string_view name,
                                        std::initializer_list<LabelMatch> match) {
  return SumSamples(samples, name, std::span<const LabelMatch>(match.begin(), match.size()));
}

}  // namespace gshare::metrics
