#include "gshare/sim/workload/trace_reader.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "gshare/common/random.h"
#include "gshare/sim/workload/csv.h"

namespace gshare {
namespace {

// Bounds on what a trace may say, so that every time converts exactly into a Duration and a
// misread unit (milliseconds read as seconds, an epoch timestamp) is an error, not a silent
// result: a trace spans at most a year; one invocation runs at most a day.
constexpr double kMaxTraceSpanSeconds = 366.0 * 86400;
constexpr double kMaxDurationSeconds = 86400;

std::uint64_t Fnv1a(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// Hashing that lets a map keyed by std::string be searched with a string_view, without a copy.
struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view name) const {
    return std::hash<std::string_view>{}(name);
  }
};
using NameIndex = std::unordered_map<std::string, std::size_t, NameHash, std::equal_to<>>;

// Collects what a reader found: invocations, and functions to add to the catalog on success.
// Nothing touches the catalog until Commit.
class TraceBuilder {
 public:
  TraceBuilder(const Catalog& catalog, const TraceOptions& options)
      : catalog_(catalog), options_(options), profile_count_(catalog.functions.size()) {
    by_name_.reserve(catalog.functions.size());
    for (std::size_t i = 0; i < catalog.functions.size(); ++i) {
      by_name_.emplace(catalog.functions[i].name, i);
    }
  }

  // The catalog index of an existing function, or -1.
  std::int64_t FindExisting(std::string_view name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? -1 : static_cast<std::int64_t>(it->second);
  }

  // The index of the function for Azure trace function `name` owned by `tenant`: an existing
  // function of that name, or a new one cloned from a profile drawn by (seed, name).
  std::size_t AzureFunction(std::string_view name, std::string_view tenant) {
    if (const auto it = by_name_.find(name); it != by_name_.end()) return it->second;
    const std::string key(name);
    Random draw(options_.seed ^ Fnv1a(name));
    const FunctionSpec& profile = catalog_.functions[draw.Below(profile_count_)];
    FunctionSpec spec = profile;
    spec.model = profile.model.empty() ? profile.name : profile.model;
    spec.name = key;
    spec.tenant = std::string(tenant);
    const std::size_t index = catalog_.functions.size() + added_.size();
    added_.push_back(std::move(spec));
    by_name_.emplace(key, index);
    return index;
  }

  void Add(std::size_t function, double arrival, double duration) {
    invocations_.push_back(Invocation{function, arrival, options_.ignore_durations ? 0 : duration});
  }

  std::size_t size() const { return invocations_.size(); }

  // Sorts by arrival, shifts so the first arrival is 0, and adds new functions to `catalog`.
  Result<RawTrace> Commit(Catalog& catalog, const std::string& path, TraceFormat format) {
    if (invocations_.empty()) {
      return InvalidArgument(fmt::format("{}: no invocations (the file has no data rows)", path));
    }
    const auto by_arrival = [](const Invocation& a, const Invocation& b) {
      return a.arrival_seconds < b.arrival_seconds;
    };
    // Most trace files are already in time order: skip the sort then.
    if (!std::is_sorted(invocations_.begin(), invocations_.end(), by_arrival)) {
      std::stable_sort(invocations_.begin(), invocations_.end(), by_arrival);
    }
    const double first = invocations_.front().arrival_seconds;
    for (auto& invocation : invocations_) invocation.arrival_seconds -= first;
    if (const double span = invocations_.back().arrival_seconds; span > kMaxTraceSpanSeconds) {
      return InvalidArgument(fmt::format(
          "{}: the trace spans {:.0f} s from its first arrival to its last, more than the {:.0f} s "
          "(one year) a trace may span: is a timestamp in the wrong unit?",
          path, span, kMaxTraceSpanSeconds));
    }
    for (auto& spec : added_) GSHARE_RETURN_IF_ERROR(catalog.AddFunction(std::move(spec)));
    RawTrace trace;
    trace.invocations = std::move(invocations_);
    trace.path = path;
    trace.format = std::string(TraceFormatName(format));
    return trace;
  }

 private:
  const Catalog& catalog_;
  const TraceOptions& options_;
  std::size_t profile_count_;
  NameIndex by_name_;
  std::vector<FunctionSpec> added_;
  std::vector<Invocation> invocations_;
};

Status RequireProfiles(const Catalog& catalog, const std::string& path) {
  if (catalog.functions.empty()) {
    return InvalidArgument(
        fmt::format("{}: the catalog has no functions to draw Azure function profiles from", path));
  }
  return Status::Ok();
}

// Reads the header row; an empty file is an error naming the file.
Status ReadHeader(CsvFile& csv, std::vector<std::string_view>& header) {
  if (!csv.NextRow(header)) {
    return InvalidArgument(
        fmt::format("{}: the file is empty (no header, no data rows)", csv.path()));
  }
  return Status::Ok();
}

Status CheckFieldCount(const CsvFile& csv, std::size_t found, std::size_t needed) {
  if (found < needed) {
    return csv.Error(fmt::format("missing column: expected {} fields, found {}", needed, found));
  }
  return Status::Ok();
}

Status NumberError(const CsvFile& csv, std::string_view column, std::string_view text) {
  return csv.Error(fmt::format("column '{}': '{}' is not a number", column, text));
}

Status CheckDuration(const CsvFile& csv, double duration, std::string_view text) {
  if (duration < 0) return csv.Error(fmt::format("duration {} is negative", text));
  if (duration > kMaxDurationSeconds) {
    return csv.Error(
        fmt::format("duration {} s is more than a day: is it in the wrong unit?", text));
  }
  return Status::Ok();
}

Result<RawTrace> ReadInvocations(CsvFile& csv, Catalog& catalog, const TraceOptions& options) {
  std::vector<std::string_view> row;
  GSHARE_RETURN_IF_ERROR(ReadHeader(csv, row));
  const int function_column = FindColumn(row, "function");
  const int timestamp_column = FindColumn(row, "timestamp");
  const int duration_column = FindColumn(row, "duration");
  if (function_column < 0 || timestamp_column < 0) {
    return csv.Error(fmt::format(
        "bad header: an invocations trace needs columns 'function' and 'timestamp' (found '{}')",
        fmt::join(row, ",")));
  }
  const std::size_t needed =
      static_cast<std::size_t>(std::max({function_column, timestamp_column, duration_column})) + 1;
  TraceBuilder builder(catalog, options);
  // Rows of one function usually come in runs: remember the last lookup.
  std::string_view last_name;
  std::size_t last_index = 0;
  while (csv.NextRow(row)) {
    GSHARE_RETURN_IF_ERROR(CheckFieldCount(csv, row.size(), needed));
    const std::string_view name = row[static_cast<std::size_t>(function_column)];
    if (name.empty() || name != last_name) {
      const std::int64_t index = builder.FindExisting(name);
      if (index < 0) {
        return Status(StatusCode::kNotFound,
                      fmt::format("{}:{}: unknown function '{}' (not in the catalog)", csv.path(),
                                  csv.line(), name));
      }
      last_name = name;
      last_index = static_cast<std::size_t>(index);
    }
    double timestamp = 0;
    const std::string_view timestamp_text = row[static_cast<std::size_t>(timestamp_column)];
    if (!ParseDouble(timestamp_text, timestamp)) {
      return NumberError(csv, "timestamp", timestamp_text);
    }
    if (timestamp < 0) return csv.Error(fmt::format("timestamp {} is negative", timestamp_text));
    double duration = 0;
    if (duration_column >= 0) {
      const std::string_view text = row[static_cast<std::size_t>(duration_column)];
      if (!text.empty()) {
        if (!ParseDouble(text, duration)) return NumberError(csv, "duration", text);
        GSHARE_RETURN_IF_ERROR(CheckDuration(csv, duration, text));
      }
    }
    builder.Add(last_index, timestamp, duration);
  }
  return builder.Commit(catalog, csv.path(), TraceFormat::kInvocations);
}

Result<RawTrace> ReadAzure2019(CsvFile& csv, Catalog& catalog, const TraceOptions& options) {
  std::vector<std::string_view> row;
  GSHARE_RETURN_IF_ERROR(ReadHeader(csv, row));
  constexpr std::string_view kFixed[] = {"HashOwner", "HashApp", "HashFunction", "Trigger"};
  for (std::size_t i = 0; i < 4; ++i) {
    if (i >= row.size() || row[i] != kFixed[i]) {
      return csv.Error(
          fmt::format("bad header: azure-2019 needs HashOwner,HashApp,HashFunction,Trigger,1,2,... "
                      "(column {} is '{}')",
                      i + 1, i < row.size() ? row[i] : ""));
    }
  }
  if (row.size() < 5) return csv.Error("bad header: no per-minute columns 1,2,...");
  for (std::size_t i = 4; i < row.size(); ++i) {
    if (row[i] != std::to_string(i - 3)) {
      return csv.Error(
          fmt::format("bad header: column {} is '{}', expected minute '{}'", i + 1, row[i], i - 3));
    }
  }
  GSHARE_RETURN_IF_ERROR(RequireProfiles(catalog, csv.path()));
  const std::size_t minutes = row.size() - 4;
  TraceBuilder builder(catalog, options);
  Random arrivals(options.seed);
  while (csv.NextRow(row)) {
    GSHARE_RETURN_IF_ERROR(CheckFieldCount(csv, row.size(), minutes + 4));
    if (row[2].empty()) return csv.Error("HashFunction is empty");
    const std::size_t function = builder.AzureFunction(row[2], row[0]);
    for (std::size_t minute = 0; minute < minutes; ++minute) {
      const std::string_view text = row[minute + 4];
      std::int64_t count = 0;
      if (!ParseInt64(text, count) || count < 0) {
        return csv.Error(
            fmt::format("column '{}': '{}' is not a non-negative count", minute + 1, text));
      }
      if (static_cast<std::uint64_t>(count) > options.max_invocations - builder.size()) {
        return csv.Error(
            fmt::format("column '{}': {} more invocations make more than the {} a "
                        "trace may hold",
                        minute + 1, text, options.max_invocations));
      }
      for (std::int64_t k = 0; k < count; ++k) {
        builder.Add(function, 60.0 * (static_cast<double>(minute) + arrivals.Uniform()), 0);
      }
    }
  }
  return builder.Commit(catalog, csv.path(), TraceFormat::kAzure2019);
}

Result<RawTrace> ReadAzure2021(CsvFile& csv, Catalog& catalog, const TraceOptions& options) {
  std::vector<std::string_view> row;
  GSHARE_RETURN_IF_ERROR(ReadHeader(csv, row));
  int columns[4];
  constexpr std::string_view kNames[] = {"app", "func", "end_timestamp", "duration"};
  for (std::size_t i = 0; i < 4; ++i) {
    columns[i] = FindColumn(row, kNames[i]);
    if (columns[i] < 0) {
      return csv.Error(fmt::format(
          "bad header: azure-2021 needs columns app,func,end_timestamp,duration (no '{}')",
          kNames[i]));
    }
  }
  GSHARE_RETURN_IF_ERROR(RequireProfiles(catalog, csv.path()));
  const std::size_t needed = static_cast<std::size_t>(*std::max_element(columns, columns + 4)) + 1;
  TraceBuilder builder(catalog, options);
  while (csv.NextRow(row)) {
    GSHARE_RETURN_IF_ERROR(CheckFieldCount(csv, row.size(), needed));
    const std::string_view app = row[static_cast<std::size_t>(columns[0])];
    const std::string_view func = row[static_cast<std::size_t>(columns[1])];
    if (func.empty()) return csv.Error("func is empty");
    double end = 0;
    double duration = 0;
    const std::string_view end_text = row[static_cast<std::size_t>(columns[2])];
    const std::string_view duration_text = row[static_cast<std::size_t>(columns[3])];
    if (!ParseDouble(end_text, end)) return NumberError(csv, "end_timestamp", end_text);
    if (!ParseDouble(duration_text, duration)) return NumberError(csv, "duration", duration_text);
    GSHARE_RETURN_IF_ERROR(CheckDuration(csv, duration, duration_text));
    builder.Add(builder.AzureFunction(func, app), end - duration, duration);
  }
  return builder.Commit(catalog, csv.path(), TraceFormat::kAzure2021);
}

bool ParseDigits(std::string_view text, std::int64_t& value) {
  value = 0;
  if (text.empty()) return false;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (the standard era-based formula).
std::int64_t DaysFromCivil(std::int64_t year, std::int64_t month, std::int64_t day) {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const std::int64_t year_of_era = year - era * 400;
  const std::int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const std::int64_t day_of_era =
      year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

// "2023-11-16 18:15:46.6805900" -> nanoseconds since 1970-01-01 (the zone does not matter: only
// differences are used). False when the text is not in that form.
bool ParseTimestamp(std::string_view text, std::int64_t& nanoseconds) {
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' ||
      (text[10] != ' ' && text[10] != 'T') || text[13] != ':' || text[16] != ':') {
    return false;
  }
  std::int64_t year, month, day, hour, minute, second;
  if (!ParseDigits(text.substr(0, 4), year) || !ParseDigits(text.substr(5, 2), month) ||
      !ParseDigits(text.substr(8, 2), day) || !ParseDigits(text.substr(11, 2), hour) ||
      !ParseDigits(text.substr(14, 2), minute) || !ParseDigits(text.substr(17, 2), second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return false;
  }
  // Nanoseconds since 1970 fit 64 bits until 2262: keep well inside.
  if (year < 1970 || year > 2200) return false;
  std::int64_t fraction_ns = 0;
  if (text.size() > 19) {
    if (text[19] != '.' || text.size() == 20) return false;
    std::string_view digits = text.substr(20);
    std::int64_t scale = 100'000'000;
    for (const char c : digits) {
      if (c < '0' || c > '9') return false;
      fraction_ns += (c - '0') * scale;
      scale /= 10;  // digits beyond nanoseconds add nothing
    }
  }
  const std::int64_t seconds =
      DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  nanoseconds = seconds * 1'000'000'000 + fraction_ns;
  return true;
}

Result<RawTrace> ReadAzureLlm(CsvFile& csv, Catalog& catalog, const TraceOptions& options) {
  std::vector<std::string_view> row;
  GSHARE_RETURN_IF_ERROR(ReadHeader(csv, row));
  const int timestamp_column = FindColumn(row, "TIMESTAMP");
  const int context_column = FindColumn(row, "ContextTokens");
  const int generated_column = FindColumn(row, "GeneratedTokens");
  if (timestamp_column < 0 || context_column < 0 || generated_column < 0) {
    return csv.Error(fmt::format(
        "bad header: azure-llm needs columns TIMESTAMP,ContextTokens,GeneratedTokens (found '{}')",
        fmt::join(row, ",")));
  }
  std::size_t function = 0;
  if (options.function.empty()) {
    if (catalog.functions.empty()) {
      return InvalidArgument(
          fmt::format("{}: the catalog has no function to attach the arrivals to", csv.path()));
    }
  } else {
    TraceBuilder lookup(catalog, options);
    const std::int64_t index = lookup.FindExisting(options.function);
    if (index < 0) {
      return Status(StatusCode::kNotFound,
                    fmt::format("{}: unknown function '{}' (not in the catalog)", csv.path(),
                                options.function));
    }
    function = static_cast<std::size_t>(index);
  }
  const std::size_t needed =
      static_cast<std::size_t>(std::max({timestamp_column, context_column, generated_column})) + 1;
  std::vector<std::int64_t> stamps;
  while (csv.NextRow(row)) {
    GSHARE_RETURN_IF_ERROR(CheckFieldCount(csv, row.size(), needed));
    std::int64_t ns = 0;
    const std::string_view text = row[static_cast<std::size_t>(timestamp_column)];
    if (!ParseTimestamp(text, ns)) {
      return csv.Error(
          fmt::format("column 'TIMESTAMP': '{}' is not a time like 2023-11-16 18:15:46.6805900 "
                      "(years 1970 to 2200)",
                      text));
    }
    for (const int column : {context_column, generated_column}) {
      std::int64_t tokens = 0;
      const std::string_view tokens_text = row[static_cast<std::size_t>(column)];
      if (!ParseInt64(tokens_text, tokens) || tokens < 0) {
        return csv.Error(fmt::format("column '{}': '{}' is not a token count",
                                     column == context_column ? "ContextTokens" : "GeneratedTokens",
                                     tokens_text));
      }
    }
    stamps.push_back(ns);
  }
  TraceBuilder builder(catalog, options);
  if (!stamps.empty()) {
    // Subtract in integers first: seconds since 1970 in a double would lose the sub-microsecond
    // digits of the trace.
    const std::int64_t first = *std::min_element(stamps.begin(), stamps.end());
    for (const std::int64_t ns : stamps) {
      builder.Add(function, static_cast<double>(ns - first) * 1e-9, 0);
    }
  }
  return builder.Commit(catalog, csv.path(), TraceFormat::kAzureLlm);
}

// Nearest-rank p90 of `values` (non-empty); reorders them.
double P90(std::vector<double>& values) {
  const std::size_t rank =
      static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(values.size())));
  const std::size_t index = rank == 0 ? 0 : rank - 1;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index),
                   values.end());
  return values[index];
}

Result<RawTrace> ReadTraceFrom(CsvFile& csv, TraceFormat format, Catalog& catalog,
                               const TraceOptions& options) {
  switch (format) {
    case TraceFormat::kInvocations:
      return ReadInvocations(csv, catalog, options);
    case TraceFormat::kAzure2019:
      return ReadAzure2019(csv, catalog, options);
    case TraceFormat::kAzure2021:
      return ReadAzure2021(csv, catalog, options);
    case TraceFormat::kAzureLlm:
      return ReadAzureLlm(csv, catalog, options);
  }
  return Internal("unknown trace format");
}

}  // namespace

Result<TraceFormat> ParseTraceFormat(std::string_view name) {
  for (const TraceFormat format : {TraceFormat::kInvocations, TraceFormat::kAzure2019,
                                   TraceFormat::kAzure2021, TraceFormat::kAzureLlm}) {
    if (TraceFormatName(format) == name) return format;
  }
  return InvalidArgument(fmt::format(
      "unknown trace format '{}' (use invocations, azure-2019, azure-2021 or azure-llm)", name));
}

std::string_view TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kInvocations:
      return "invocations";
    case TraceFormat::kAzure2019:
      return "azure-2019";
    case TraceFormat::kAzure2021:
      return "azure-2021";
    case TraceFormat::kAzureLlm:
      return "azure-llm";
  }
  return "unknown";
}

bool TraceFormatDrawsWithSeed(TraceFormat format) {
  return format == TraceFormat::kAzure2019 || format == TraceFormat::kAzure2021;
}

Result<RawTrace> ReadTrace(const std::string& path, TraceFormat format, Catalog& catalog,
                           const TraceOptions& options) {
  GSHARE_ASSIGN_OR_RETURN(CsvFile csv, CsvFile::Open(path));
  return ReadTraceFrom(csv, format, catalog, options);
}

Result<RawTrace> ReadTraceText(std::string text, std::string name, TraceFormat format,
                               Catalog& catalog, const TraceOptions& options) {
  CsvFile csv = CsvFile::FromText(std::move(text), std::move(name));
  return ReadTraceFrom(csv, format, catalog, options);
}

Result<Workload> BuildWorkload(const Catalog& catalog, const RawTrace& trace, const GpuType& gpu) {
  constexpr std::uint32_t kUnused = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> dense(catalog.functions.size(), kUnused);
  std::vector<std::vector<double>> durations(catalog.functions.size());
  for (const auto& invocation : trace.invocations) {
    if (invocation.function >= catalog.functions.size()) {
      return InvalidArgument(fmt::format("trace {}: function index {} is not in the catalog",
                                         trace.path, invocation.function));
    }
    dense[invocation.function] = 0;
    if (invocation.duration_seconds > 0) {
      durations[invocation.function].push_back(invocation.duration_seconds);
    }
  }
  Workload workload;
  workload.gpu = gpu;
  workload.trace_path = trace.path;
  workload.trace_format = trace.format;
  for (std::size_t i = 0; i < catalog.functions.size(); ++i) {
    if (dense[i] == kUnused) continue;
    std::optional<Duration> p90;
    if (!durations[i].empty()) {
      GSHARE_ASSIGN_OR_RETURN(p90, DurationFromSeconds(P90(durations[i])));
    }
    auto resolved = ResolveFunction(catalog.functions[i], gpu, catalog.gpu_types, p90);
    if (!resolved.ok()) return resolved.status().WithContext(fmt::format("GPU type {}", gpu.name));
    dense[i] = static_cast<std::uint32_t>(workload.functions.size());
    workload.functions.push_back(std::move(resolved).value());
  }
  workload.requests.reserve(trace.invocations.size());
  bool has_durations = false;
  for (const auto& invocation : trace.invocations) {
    Request request;
    request.function = dense[invocation.function];
    GSHARE_ASSIGN_OR_RETURN(const Duration arrival,
                            DurationFromSeconds(invocation.arrival_seconds));
    request.arrival = TimePoint(arrival);
    request.deadline = request.arrival + workload.functions[request.function].slo;
    // The id holds the invocation's index until the sort below.
    request.id = workload.requests.size();
    has_durations = has_durations || invocation.duration_seconds > 0;
    workload.requests.push_back(request);
  }
  const auto by_arrival = [](const Request& a, const Request& b) { return a.arrival < b.arrival; };
  if (!std::is_sorted(workload.requests.begin(), workload.requests.end(), by_arrival)) {
    std::stable_sort(workload.requests.begin(), workload.requests.end(), by_arrival);
  }
  if (has_durations) workload.exec_times.assign(workload.requests.size(), Duration::zero());
  for (std::size_t i = 0; i < workload.requests.size(); ++i) {
    Request& request = workload.requests[i];
    if (has_durations) {
      const double seconds = trace.invocations[request.id].duration_seconds;
      if (seconds > 0) {
        GSHARE_ASSIGN_OR_RETURN(workload.exec_times[i], DurationFromSeconds(seconds));
      }
    }
    request.id = i;
  }
  return workload;
}

}  // namespace gshare
