// Fuzz target: the trace readers (CSV: invocations, azure-2019, azure-2021, azure-llm) and the
// workload built from what they read. The first byte picks the format.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gshare/model/catalog.h"
#include "gshare/sim/workload/trace_reader.h"

namespace {

const gshare::Catalog& BaseCatalog() {
  static const gshare::Catalog catalog = [] {
    auto parsed = gshare::ParseCatalog(
        "functions:\n"
        "  - name: resnet50\n    model_size: 98Mi\n    exec_latency: 2ms\n    max_batch: 4\n"
        "  - name: bert\n    model_size: 420Mi\n    exec_latency: 6ms\n",
        "fuzz-catalog.yaml");
    if (!parsed.ok()) __builtin_trap();
    return *parsed;
  }();
  return catalog;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  constexpr gshare::TraceFormat kFormats[] = {
      gshare::TraceFormat::kInvocations, gshare::TraceFormat::kAzure2019,
      gshare::TraceFormat::kAzure2021, gshare::TraceFormat::kAzureLlm};
  const gshare::TraceFormat format = kFormats[data[0] % 4];
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  gshare::Catalog catalog = BaseCatalog();
  gshare::TraceOptions options;
  options.max_invocations = 100'000;  // keeps each input cheap; the bound itself is exercised
  auto trace = gshare::ReadTraceText(std::move(text), "fuzz.csv", format, catalog, options);
  if (!trace.ok()) return 0;
  const gshare::GpuType* gpu = catalog.FindGpuType("a100-40gb");
  if (gpu == nullptr) __builtin_trap();
  auto workload = gshare::BuildWorkload(catalog, *trace, *gpu);
  if (workload.ok()) {
    for (std::size_t i = 1; i < workload->requests.size(); ++i) {
      if (workload->requests[i].arrival < workload->requests[i - 1].arrival) __builtin_trap();
    }
  }
  return 0;
}
