// Trace readers: turn a trace file into invocations of catalog functions.
//
// Formats:
//   invocations  CSV whose header names at least `function` and `timestamp` (seconds, float),
//                optionally `duration` (seconds: this request's execution time).
//   azure-2019   Azure Functions 2019 per-minute counts
//                (HashOwner,HashApp,HashFunction,Trigger,1..1440);
//                each minute's count is spread over the minute by a seeded uniform draw.
//   azure-2021   Azure Functions 2021: app,func,end_timestamp,duration; arrival = end - duration.
//   azure-llm    Azure LLM inference 2023: TIMESTAMP,ContextTokens,GeneratedTokens; arrivals of
//                one function (TraceOptions::function, default the catalog's first).
// Azure function hashes are not catalog names: each distinct trace function becomes a function of
// its own whose profile is drawn (seeded) from the catalog, owned by its HashOwner/app.
// Reading is all-or-nothing: any error (missing column, non-numeric field, unknown function,
// empty file) returns a Status naming the file and line, and nothing is added to the catalog.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/model/catalog.h"
#include "gshare/sim/workload/workload.h"

namespace gshare {

enum class TraceFormat { kInvocations, kAzure2019, kAzure2021, kAzureLlm };

Result<TraceFormat> ParseTraceFormat(std::string_view name);
std::string_view TraceFormatName(TraceFormat format);
// Whether reading `format` draws anything with TraceOptions::seed: azure-2019 spreads each
// minute's count over the minute, and both Azure Functions formats draw the profiles of trace
// functions. Other formats read the same with every seed.
bool TraceFormatDrawsWithSeed(TraceFormat format);

struct TraceOptions {
  std::uint64_t seed = 1;
  std::string function;  // azure-llm: the catalog function whose arrivals these are
  // When true, durations in the trace (invocations, azure-2021) are not used as execution times:
  // every request runs for its function's profiled latency. Azure Functions 2021 durations are
  // those of CPU functions, not of GPU inference, so a GPU study usually sets this.
  bool ignore_durations = false;
  // The most invocations a trace may expand to (azure-2019 gives counts per minute): a bound on
  // the memory a trace may take (about 24 bytes each).
  std::uint64_t max_invocations = 500'000'000;
};

struct Invocation {
  std::size_t function = 0;     // index into Catalog::functions
  double arrival_seconds = 0;   // from the trace's first arrival (which is 0)
  double duration_seconds = 0;  // > 0: execution time given by the trace
};

struct RawTrace {
  std::vector<Invocation> invocations;  // sorted by arrival (stable)
  std::string path;    // the file read ("generated" for the generator), for reports
  std::string format;  // TraceFormatName of the format read, for reports
};

// Reads `path` in `format`. On success, functions the trace needs (Azure formats) have been added
// to `catalog`; on error `catalog` is unchanged. An Azure trace function whose hash is already a
// catalog function's name uses that function (so a catalog can pin profiles for chosen hashes);
// other hashes draw a profile from the functions the catalog held before the call, by a draw
// seeded with options.seed and the hash (the same hash gets the same profile in every file).
// Errors: NotFound (no file, unknown function), InvalidArgument ("path:line: ..." for bad
// content; "path: ..." for an empty file or a catalog with no functions to draw from).
Result<RawTrace> ReadTrace(const std::string& path, TraceFormat format, Catalog& catalog,
                           const TraceOptions& options);
// The same for trace text held in memory; `name` stands for the path in messages.
Result<RawTrace> ReadTraceText(std::string text, std::string name, TraceFormat format,
                               Catalog& catalog, const TraceOptions& options);

// Resolves every function the trace invokes for `gpu` (default SLOs use the p90 of trace durations
// where the trace gives them) and builds the request table. Functions the trace never invokes are
// left out; FunctionIds are dense, in catalog order. Requests are sorted by arrival (ties keep
// trace order) with ids 0..n-1; deadline = arrival + the function's SLO; Workload::exec_times holds
// the trace durations where it gives them. Errors: those of ResolveFunction, naming the function.
Result<Workload> BuildWorkload(const Catalog& catalog, const RawTrace& trace, const GpuType& gpu);

}  // namespace gshare
