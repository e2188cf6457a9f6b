#include "gshare/metrics/prometheus_text.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace gshare::metrics {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Equal ignoring ASCII case; `lower` is lower case.
bool EqualsLower(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

// A cursor over one line; every error names the line.
class LineReader {
 public:
  LineReader(std::string_view line, std::size_t number) : line_(line), number_(number) {}

  Status Error(std::string_view what) const {
    return InvalidArgument(fmt::format("line {}: {}", number_, what));
  }
  bool AtEnd() const { return pos_ == line_.size(); }
  char Peek() const { return line_[pos_]; }
  // Skips spaces and tabs; true when there was one.
  bool SkipBlanks() {
    const std::size_t start = pos_;
    while (!AtEnd() && IsBlank(Peek())) ++pos_;
    return pos_ > start;
  }
  bool Consume(char c) {
    if (AtEnd() || Peek() != c) return false;
    ++pos_;
    return true;
  }

  // [a-zA-Z_:][a-zA-Z0-9_:]* (metric) or [a-zA-Z_][a-zA-Z0-9_]* (label).
  Result<std::string> Name(bool metric) {
    const std::size_t start = pos_;
    auto allowed = [metric](char c, bool first) {
      return IsLetter(c) || c == '_' || (metric && c == ':') || (!first && IsDigit(c));
    };
    while (!AtEnd() && allowed(Peek(), pos_ == start)) ++pos_;
    if (pos_ == start) {
      return Error(metric ? "expected a metric name" : "expected a label name");
    }
    return std::string(line_.substr(start, pos_ - start));
  }

  // A double-quoted label value, unescaped.
  Result<std::string> QuotedValue() {
    if (!Consume('"')) return Error("expected '\"' to open a label value");
    std::string value;
    while (!AtEnd()) {
      const char c = line_[pos_++];
      if (c == '"') return value;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (AtEnd()) break;
      const char escaped = line_[pos_++];
      if (escaped == '\\' || escaped == '"') {
        value += escaped;
      } else if (escaped == 'n') {
        value += '\n';
      } else {
        return Error(
            fmt::format("an unknown escape '\\{}' in a label value",
                        std::isprint(static_cast<unsigned char>(escaped))
                            ? std::string(1, escaped)
                            : fmt::format("x{:02x}", static_cast<unsigned char>(escaped))));
      }
    }
    return Error("a label value without its closing '\"'");
  }

  // The next run of non-blank characters.
  std::string_view Token() {
    const std::size_t start = pos_;
    while (!AtEnd() && !IsBlank(Peek())) ++pos_;
    return line_.substr(start, pos_ - start);
  }

 private:
  std::string_view line_;
  std::size_t number_;
  std::size_t pos_ = 0;
};

// A Go-style float: what strconv.ParseFloat takes in the Prometheus parser (hexadecimal and
// underscores aside).
std::optional<double> ParseValue(std::string_view text) {
  std::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  if (EqualsLower(digits, "inf") || EqualsLower(digits, "infinity")) {
    const double inf = std::numeric_limits<double>::infinity();
    return negative ? -inf : inf;
  }
  if (EqualsLower(digits, "nan")) return std::numeric_limits<double>::quiet_NaN();
  // Only digits, '.', exponents and signs after them reach from_chars: it would read "nan(...)"
  // and "infinity" spellings the format does not have, and hexadecimal needs a prefix anyway.
  if (digits.empty() || !(IsDigit(digits.front()) || digits.front() == '.')) return std::nullopt;
  for (char c : digits) {
    if (!(IsDigit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      return std::nullopt;
    }
  }
  double value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  // A value too large for a double reads as infinity, as Go's ParseFloat (with an error the
  // Prometheus parser reports); here it is refused.
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return negative ? -value : value;
}

Result<Sample> ParseSampleLine(std::string_view line, std::size_t number) {
  LineReader reader(line, number);
  Sample sample;
  reader.SkipBlanks();
  GSHARE_ASSIGN_OR_RETURN(sample.name, reader.Name(/*metric=*/true));
  const bool blank_after_name = reader.SkipBlanks();
  if (reader.Consume('{')) {
    for (;;) {
      reader.SkipBlanks();
      if (reader.Consume('}')) break;
      GSHARE_ASSIGN_OR_RETURN(std::string label, reader.Name(/*metric=*/false));
      for (const auto& [seen, value] : sample.labels) {
        if (seen == label) return reader.Error(fmt::format("the label '{}' appears twice", label));
      }
      reader.SkipBlanks();
      if (!reader.Consume('=')) return reader.Error("expected '=' after a label name");
      reader.SkipBlanks();
      GSHARE_ASSIGN_OR_RETURN(std::string value, reader.QuotedValue());
      sample.labels.emplace_back(std::move(label), std::move(value));
      reader.SkipBlanks();
      if (reader.Consume(',')) continue;
      if (reader.Consume('}')) break;
      return reader.Error("expected ',' or '}' after a label value");
    }
  } else if (!blank_after_name && !reader.AtEnd()) {
    return reader.Error("expected '{' or a blank after the metric name");
  }
  reader.SkipBlanks();
  const std::string_view value_text = reader.Token();
  if (value_text.empty()) return reader.Error("a sample without a value");
  const std::optional<double> value = ParseValue(value_text);
  if (!value) return reader.Error(fmt::format("'{}' is not a sample value", value_text));
  sample.value = *value;
  reader.SkipBlanks();
  if (!reader.AtEnd()) {
    const std::string_view stamp = reader.Token();
    std::int64_t ms = 0;
    const auto [end, error] = std::from_chars(stamp.data(), stamp.data() + stamp.size(), ms);
    if (error != std::errc() || end != stamp.data() + stamp.size()) {
      return reader.Error(fmt::format("'{}' is not a timestamp (milliseconds)", stamp));
    }
    sample.timestamp_ms = ms;
    reader.SkipBlanks();
    if (!reader.AtEnd()) return reader.Error("text after the timestamp");
  }
  return sample;
}

}  // namespace

std::optional<std::string_view> Sample::Label(std::string_view label_name) const {
  for (const auto& [name_of, label_value] : labels) {
    if (name_of == label_name) return std::string_view(label_value);
  }
  return std::nullopt;
}

Result<std::vector<Sample>> ParsePrometheusText(std::string_view text) {
  std::vector<Sample> samples;
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t first = 0;
    while (first < line.size() && IsBlank(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;
    GSHARE_ASSIGN_OR_RETURN(Sample sample, ParseSampleLine(line, number));
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::optional<double> SumSamples(std::span<const Sample> samples, std::string_view name,
                                 std::span<const LabelMatch> match) {
  std::optional<double> sum;
  for (const Sample& sample : samples) {
    if (sample.name != name) continue;
    bool matches = true;
    for (const auto& [label, value] : match) {
      const auto found = sample.Label(label);
      matches = matches && found && *found == value;
    }
    if (matches) sum = sum.value_or(0) + sample.value;
  }
  return sum;
}

}  // namespace gshare::metrics
