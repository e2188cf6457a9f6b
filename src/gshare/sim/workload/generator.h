// The workload generator: a multi-tenant catalog and an invocation trace whose statistics follow
// published measurements of serverless platforms and of served models (docs/workloads.md).
//
// For each function, in order, from a per-function stream of one seeded generator:
//   1. a model size class: under 1 GB with p = 0.664, 1-4 GB with p = 0.781 - 0.664, above 4 GB
//      otherwise (gShare, ASPLOS'26: 66.4% of popular models are under 1 GB, 78.1% under 4 GB);
//      then a profile drawn uniformly from the profile catalog's functions in that class (a class
//      the catalog lacks falls back to the nearest class it has);
//   2. a tenant, uniformly among `tenants`;
//   3. a mean rate, piecewise log-uniform over 1 to 1e8 invocations per day, with 45% of the mass
//      at or below 1 per hour and 81% at or below 1 per minute (Shahrad et al., USENIX ATC'20);
//   4. arrivals: a renewal process with hyper-exponential inter-arrival times of coefficient of
//      variation `burst_cv` (bursty when > 1), thinned by a diurnal factor
//      1 + diurnal_amplitude x cos(2 pi (clock - 12h) / 24h), whose daily mean is 1.
// With `batching` (the default), each function also draws, from a stream of its own (so the
// draws above and the arrivals do not depend on it), how it batches: a max_batch that shrinks
// with the model's size class ({4, 8, 16, 32} under 1 GB, {2, 4, 8, 16} to 4 GB, {1, 2, 4, 8}
// above, uniformly), a sublinear latency curve L(b) = L(1) x b^alpha with alpha uniform in
// [0.45, 0.85] (around the 0.64 of the measured ResNet-50 curve, data/models.yaml), written for
// batches 1, 2, 4, ..., max_batch (ResolveFunction interpolates between them), and a batch memory
// of one request's activations (its profile's gpu_memory less model_size and the 256 MiB
// workspace, at least 16 MiB), max_batch halved until a full batch needs at most four times the
// function's GPU memory (or 4 GiB) and fits its reference GPU type.
// The `memory` regime draws many large, rarely called models instead: size classes with
// probabilities 0.2 / 0.3 / 0.5, and mean rates log-uniform between 1 per hour and 4 per minute,
// so that GPU memory, not compute, bounds the GPUs a trace needs.
// The result is a pure function of the options: the same seed gives the same catalog and trace.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/model/catalog.h"
#include "gshare/sim/workload/trace_reader.h"

namespace gshare {

enum class WorkloadRegime {
  kCompute,  // the published statistics above
  kMemory,   // many large, rarely called models
};
// "compute" or "memory"; InvalidArgument naming the known regimes otherwise.
Result<WorkloadRegime> ParseWorkloadRegime(std::string_view text);
std::string_view WorkloadRegimeName(WorkloadRegime regime);

struct GeneratorOptions {
  int functions = 100;
  Duration duration = std::chrono::hours(1);
  std::uint64_t seed = 1;
  int tenants = 0;  // 0: one tenant per 10 functions, at least 1
  // The profiles functions are drawn from; empty: the embedded data/models.yaml.
  std::string profile_catalog_path;
  double burst_cv = 2.0;           // inter-arrival coefficient of variation, >= 1
  double diurnal_amplitude = 0.5;  // in [0, 1)
  // The trace's start on the diurnal clock, hours in [0, 24). The default, 6, is where the daily
  // factor crosses its mean on the way up to the noon peak, so a short trace sees about the mean.
  double start_hour = 6;
  // When > 0, every rate is multiplied by one factor so that the expected number of invocations
  // in the window (diurnal factor included) is this (the spread and shape of rates are kept; the
  // 1/hour and 1/minute fractions shift).
  std::uint64_t target_invocations = 0;
  // When > 0, every function's SLO is this x its p90 execution latency (catalog slo_factor);
  // 0 leaves the catalog default (1.5). Larger factors give requests slack to wait in.
  double slo_factor = 0;
  WorkloadRegime regime = WorkloadRegime::kCompute;
  // Each function draws a max_batch and a batch-latency curve (above); off: every function at
  // max_batch 1 with its profile's one latency, as earlier versions generated.
  bool batching = true;
  // GenerateCatalogWorkload only: the mean total request rate over the window, in (0,
  // kMaxCatalogRatePerSecond]; 0: the default (kDefaultCatalogLoad).
  double rate_per_second = 0;
  // Called now and then with (functions done, functions in all); may be empty.
  std::function<void(int, int)> progress;
};

struct GeneratedWorkload {
  Catalog catalog;  // functions fn-0..., tenants tenant-0...; the built-in GPU types
  RawTrace trace;   // arrivals in seconds from the first (0), rounded to microseconds
  std::vector<double> rate_per_second;  // each function's mean rate, before any target scaling
  double rate_scale = 1;                // the factor target_invocations applied
};

// Size classes of the generator, by model_size in bytes (decimal gigabytes, as published).
inline constexpr std::uint64_t kSmallModelLimitBytes = 1'000'000'000;   // "under 1 GB"
inline constexpr std::uint64_t kMediumModelLimitBytes = 4'000'000'000;  // "under 4 GB"
inline constexpr double kFractionUnder1GB = 0.664;
inline constexpr double kFractionUnder4GB = 0.781;
inline constexpr double kFractionAtMostHourly = 0.45;
inline constexpr double kFractionAtMostMinutely = 0.81;

// Errors: bad options (InvalidArgument), an unreadable or empty profile catalog.
Result<GeneratedWorkload> GenerateWorkload(const GeneratorOptions& options);

// A trace over a given catalog's functions (a deployed catalog, kept as it is), so a live replay
// exercises sharing and switching across them. Each function, in catalog order, draws a rate
// (step 3 above) from its own stream; its share of the total rate is
// kCatalogEvenShare / n + (1 - kCatalogEvenShare) x its rate / the sum of rates, so the Azure
// skew shapes popularity while every function keeps at least kCatalogEvenShare / n of the
// requests. Arrivals follow step 4, and the diurnal shape of step 5 with the rates scaled so the
// mean total rate over the window is `rate_per_second`; its default is the rate at which every
// request's batch-1 latency (on its reference GPU type) keeps one GPU busy kDefaultCatalogLoad of
// the time, at most kMaxCatalogRatePerSecond. Uses duration, seed, burst_cv, diurnal_amplitude,
// start_hour, rate_per_second and progress; `functions` and `batching` are ignored, and tenants,
// profiles, target_invocations, slo_factor and regime must be left unset. The result's
// rate_per_second holds each function's mean rate (rate_scale 1). Deterministic for the options and
// the catalog. Errors (InvalidArgument): bad options, an empty catalog, a function name
// invocations.csv cannot hold, more than kMaxCatalogInvocations expected, no arrival at all.
Result<GeneratedWorkload> GenerateCatalogWorkload(const Catalog& catalog,
                                                  const GeneratorOptions& options);

// The fraction of a catalog trace's requests spread evenly over its functions.
inline constexpr double kCatalogEvenShare = 0.1;
// The default offered load of a catalog trace: busy fraction of one GPU.
inline constexpr double kDefaultCatalogLoad = 0.5;
inline constexpr double kMaxCatalogRatePerSecond = 1e6;
inline constexpr double kMaxCatalogInvocations = 1e8;

// Writes DIR/catalog.yaml (CatalogToYaml) and DIR/invocations.csv (function,timestamp), creating
// DIR. Byte-identical output for identical workloads.
Status WriteGeneratedWorkload(const GeneratedWorkload& workload, const std::string& dir);

// Writes DIR/invocations.csv only (function,timestamp), creating DIR: the trace of a catalog the
// caller already has. Byte-identical output for identical workloads.
Status WriteInvocations(const GeneratedWorkload& workload, const std::string& dir);

}  // namespace gshare
