// Prints the forward pass's time per batch for each example model, one BLAS thread:
//   gshare_example_forward_timing [runs]
// For each model and batch size: the median and the minimum over `runs` timed calls (default 21)
// after one warm-up call, in milliseconds per batch and per example; then the same for the double
// reference (reference.h), which the node runs to check responses. A figure for docs, not a test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "examples/models/forward.h"
#include "examples/models/reference.h"
#include "examples/models/weights.h"

namespace {

using gshare::examples::ModelKind;

int TimeModel(ModelKind kind, int runs) {
  namespace ex = gshare::examples;
  const ex::ModelLayout& layout = ex::LayoutOf(kind);
  auto weights = ex::PackWeights(layout, ex::GenerateWeights(layout, 1));
  if (!weights.ok()) {
    std::fprintf(stderr, "%s\n", weights.status().ToString().c_str());
    return 1;
  }
  for (std::int64_t batch : {1, 4, 8, 16, 32}) {
    const std::vector<float> inputs = ex::GenerateInputs(layout, batch, 7);
    auto floats = ex::WorkspaceFloats(kind, batch);
    if (!floats.ok()) return 1;
    std::vector<float> workspace(*floats);
    std::vector<float> logits(static_cast<std::size_t>(batch * layout.classes));
    std::vector<double> ms;
    for (int run = 0; run <= runs; ++run) {
      const auto start = std::chrono::steady_clock::now();
      const gshare::Status status = ex::Forward(kind, *weights, inputs, batch, workspace, logits);
      const auto stop = std::chrono::steady_clock::now();
      if (!status.ok()) {
        std::fprintf(stderr, "%s\n", status.ToString().c_str());
        return 1;
      }
      if (run > 0) ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    std::printf("%-4s batch %3lld  median %8.3f ms  min %8.3f ms  median per example %7.3f ms\n",
                layout.name.c_str(), static_cast<long long>(batch), median, ms.front(),
                median / static_cast<double>(batch));
  }
  for (std::int64_t batch : {1, 8}) {
    const std::vector<float> inputs = ex::GenerateInputs(layout, batch, 7);
    std::vector<double> ms;
    for (int run = 0; run <= runs; ++run) {
      const auto start = std::chrono::steady_clock::now();
      auto reference = ex::ReferenceForward(kind, *weights, inputs, batch);
      const auto stop = std::chrono::steady_clock::now();
      if (!reference.ok()) {
        std::fprintf(stderr, "%s\n", reference.status().ToString().c_str());
        return 1;
      }
      if (run > 0) ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    std::printf(
        "%-4s batch %3lld  reference (double, no BLAS) median %8.3f ms  per example %7.3f ms\n",
        layout.name.c_str(), static_cast<long long>(batch), median,
        median / static_cast<double>(batch));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  gshare::examples::UseSingleBlasThread();
  std::printf("OpenBLAS threads: %d (%s), %d timed runs per point\n",
              gshare::examples::BlasThreads(), gshare::examples::BlasConfig(), runs);
  if (TimeModel(ModelKind::kMlp, runs) != 0) return 1;
  return TimeModel(ModelKind::kCnn, runs);
}
