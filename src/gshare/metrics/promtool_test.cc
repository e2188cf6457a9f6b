// `promtool check metrics` (Prometheus's own parser and linter) on the full metric set.
//
// promtool comes from Debian's prometheus package (scripts/setup.sh installs it). Where it is
// missing the test fails when CI=true and is skipped otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gshare/metrics/gshare_metrics.h"

namespace gshare::metrics {
namespace {

using std::chrono::milliseconds;

struct CommandResult {
  int exit_status = -1;
  std::string output;  // stdout and stderr together
};

CommandResult RunShell(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(PromtoolTest, CheckMetricsPassesOnTheFullMetricSet) {
  const CommandResult which = RunShell("command -v promtool");
  if (which.exit_status != 0) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true") {
      FAIL() << "promtool is not installed (Debian package 'prometheus'; scripts/setup.sh "
                "installs it), and CI=true requires this check";
    }
    GTEST_SKIP() << "promtool is not installed (Debian package 'prometheus'; run "
                    "scripts/setup.sh); skipping the promtool check";
  }

  auto created = GshareMetrics::Create();
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  GshareMetrics& metrics = **created;
  // Two functions of two tenants, one with every character that needs escaping in its labels.
  auto plain = metrics.AddFunction("resnet50", "acme");
  auto odd = metrics.AddFunction("bert \"large\"", "team\\b\nline two");
  ASSERT_TRUE(plain.ok() && odd.ok());
  for (auto* series : {plain->get(), odd->get()}) {
    series->RequestFinished(RequestOutcome::kOk, milliseconds(12));
    series->RequestFinished(RequestOutcome::kError, milliseconds(700));
    series->RequestFinished(RequestOutcome::kDeadlineExceeded, milliseconds(100));
    series->RequestStarted(milliseconds(2));
    series->RestoreFinished(milliseconds(150));
  }
  MeterFeed feed(metrics);
  feed.Bind(0, *plain);
  feed.Bind(1, *odd);
  feed.GpuAcquired(AtSeconds(0), 0);
  feed.Reserved(AtSeconds(0.5), 0, 2.5e9);
  feed.Restored(AtSeconds(0.5), 0, 98'000'000);
  feed.Reserved(AtSeconds(0.7), 1, 1.3e9);
  feed.Restored(AtSeconds(0.7), 1, 440'000'000);
  Request request;
  request.function = 0;
  request.arrival = AtSeconds(1);
  request.deadline = AtSeconds(1.1);
  feed.Answered(AtSeconds(1.05), request, AnswerOutcome::kOk);
  feed.Checkpointed(AtSeconds(2), 1, 1'000'000);
  feed.Publish(AtSeconds(3.3));

  const std::string text = metrics.Expose();
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() /
      ("gshare_metrics_promtool_" + std::to_string(::getpid()) + ".prom");
  {
    std::ofstream out(file, std::ios::binary);
    out << text;
    ASSERT_TRUE(out.good());
  }
  const CommandResult check = RunShell("promtool check metrics < '" + file.string() + "'");
  std::filesystem::remove(file);
  EXPECT_EQ(check.exit_status, 0) << check.output << "\n--- exposition ---\n" << text;
  // Lint problems are printed (and exit non-zero); a clean run prints nothing.
  EXPECT_EQ(check.output, "") << "--- exposition ---\n" << text;
}

}  // namespace
}  // namespace gshare::metrics
