#include "examples/models/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "examples/models/compare.h"
#include "examples/models/reference.h"
#include "examples/models/weights.h"

namespace gshare::examples {
namespace {

constexpr std::uint64_t kWeightSeed = 20;
constexpr std::size_t kCanaryFloats = 64;
constexpr std::uint32_t kCanaryBits = 0x7fc0beefU;  // a NaN no computation produces

const std::vector<float>& WeightsOf(ModelKind kind) {
  static std::map<ModelKind, std::vector<float>> cache;
  auto it = cache.find(kind);
  if (it == cache.end()) {
    const ModelLayout& layout = LayoutOf(kind);
    auto block = PackWeights(layout, GenerateWeights(layout, kWeightSeed));
    EXPECT_TRUE(block.ok()) << block.status().ToString();
    it = cache.emplace(kind, block.ok() ? *block : std::vector<float>{}).first;
  }
  return it->second;
}

float Canary() {
  float v;
  std::memcpy(&v, &kCanaryBits, sizeof v);
  return v;
}

bool CanariesIntact(const std::vector<float>& buffer, std::size_t used) {
  for (std::size_t i = used; i < buffer.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &buffer[i], sizeof bits);
    if (bits != kCanaryBits) return false;
  }
  return true;
}

// Runs Forward with the workspace and the logits each followed by canaries, the workspace
// pre-filled with NaN (a read before a write would poison the logits); checks the canaries.
std::vector<float> GuardedForward(ModelKind kind, const std::vector<float>& inputs,
                                  std::int64_t batch) {
  const ModelLayout& layout = LayoutOf(kind);
  auto floats = WorkspaceFloats(kind, batch);
  EXPECT_TRUE(floats.ok());
  if (!floats.ok()) return {};
  std::vector<float> workspace(*floats + kCanaryFloats, Canary());
  std::fill_n(workspace.begin(), *floats, std::numeric_limits<float>::quiet_NaN());
  const auto logit_count = static_cast<std::size_t>(batch * layout.classes);
  std::vector<float> logits(logit_count + kCanaryFloats, Canary());
  const Status status =
      Forward(kind, WeightsOf(kind), inputs, batch, std::span(workspace).first(*floats),
              std::span(logits).first(logit_count));
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(CanariesIntact(workspace, *floats)) << "workspace overrun, batch " << batch;
  EXPECT_TRUE(CanariesIntact(logits, logit_count)) << "logits overrun, batch " << batch;
  logits.resize(logit_count);
  return logits;
}

class ForwardTest : public ::testing::TestWithParam<ModelKind> {
 protected:
  static void SetUpTestSuite() { UseSingleBlasThread(); }
  ModelKind kind() const { return GetParam(); }
  const ModelLayout& layout() const { return LayoutOf(GetParam()); }
};

TEST_P(ForwardTest, MatchesTheReferenceWithinTolerance) {
  EXPECT_EQ(BlasThreads(), 1);
  for (std::int64_t batch : {1, 3, 8}) {
    const std::vector<float> inputs = GenerateInputs(layout(), batch, 100 + batch);
    const std::vector<float> logits = GuardedForward(kind(), inputs, batch);
    auto reference = ReferenceForward(kind(), WeightsOf(kind()), inputs, batch);
    ASSERT_TRUE(reference.ok()) << reference.status().ToString();
    auto comparison = CompareOutputs(logits, *reference, layout().classes);
    ASSERT_TRUE(comparison.ok()) << comparison.status().ToString();
    EXPECT_TRUE(comparison->within_tolerance)
        << "batch " << batch << ": " << comparison->ToString();
    // Far inside the tolerance: float rounding over a few thousand terms per sum.
    EXPECT_LT(comparison->worst_relative_error, 1e-5) << comparison->ToString();
    std::printf("[ %s batch %lld: %s ]\n", layout().name.c_str(), static_cast<long long>(batch),
                comparison->ToString().c_str());
  }
}

TEST_P(ForwardTest, LogitsAreInRangeAndDependOnTheInput) {
  const std::int64_t batch = 8;
  const std::vector<float> logits =
      GuardedForward(kind(), GenerateInputs(layout(), batch, 5), batch);
  const auto classes = static_cast<std::size_t>(layout().classes);
  for (std::size_t row = 0; row < static_cast<std::size_t>(batch); ++row) {
    double scale = 0.0;
    for (std::size_t j = 0; j < classes; ++j) {
      ASSERT_TRUE(std::isfinite(logits[row * classes + j]));
      scale = std::max(scale, std::fabs(static_cast<double>(logits[row * classes + j])));
    }
    // The He scaling keeps activations of order one: neither vanishing nor exploding.
    EXPECT_GT(scale, 0.01) << "row " << row;
    EXPECT_LT(scale, 100.0) << "row " << row;
    if (row > 0) {
      EXPECT_NE(logits[row * classes], logits[(row - 1) * classes]) << "row " << row;
    }
  }
}

TEST_P(ForwardTest, RepeatedCallsAreBitIdentical) {
  const std::vector<float> inputs = GenerateInputs(layout(), 3, 8);
  EXPECT_EQ(GuardedForward(kind(), inputs, 3), GuardedForward(kind(), inputs, 3));
}

// Row i of a batch equals example i computed alone within tolerance. Bit-identity is not
// guaranteed (BLAS may block a product differently for another row count); the test reports it.
TEST_P(ForwardTest, BatchIsSplitConsistent) {
  const std::int64_t batch = 8;
  const std::vector<float> inputs = GenerateInputs(layout(), batch, 77);
  const std::vector<float> together = GuardedForward(kind(), inputs, batch);
  const auto per_example = static_cast<std::size_t>(layout().input_elements());
  const auto classes = static_cast<std::size_t>(layout().classes);
  bool bit_identical = true;
  for (std::size_t i = 0; i < static_cast<std::size_t>(batch); ++i) {
    const std::vector<float> one(
        inputs.begin() + static_cast<std::ptrdiff_t>(i * per_example),
        inputs.begin() + static_cast<std::ptrdiff_t>((i + 1) * per_example));
    const std::vector<float> alone = GuardedForward(kind(), one, 1);
    const std::span<const float> row = std::span(together).subspan(i * classes, classes);
    auto comparison = CompareOutputs(row, alone, layout().classes);
    ASSERT_TRUE(comparison.ok());
    EXPECT_TRUE(comparison->within_tolerance) << "example " << i << ": " << comparison->ToString();
    bit_identical = bit_identical && std::equal(row.begin(), row.end(), alone.begin());
  }
  std::printf("[ %s: batch of 8 vs one by one bit-identical: %s ]\n", layout().name.c_str(),
              bit_identical ? "yes" : "no");
}

// A restored function may find its buffers at other addresses: the logits must not depend on
// where the weights, inputs, workspace and logits lie (BLAS packs its operands).
TEST_P(ForwardTest, ResultsDoNotDependOnBufferAddresses) {
  for (std::int64_t batch : {1, 5}) {
    const std::vector<float> inputs = GenerateInputs(layout(), batch, 31);
    const std::vector<float> expected = GuardedForward(kind(), inputs, batch);
    const std::vector<float>& weights = WeightsOf(kind());
    auto floats = WorkspaceFloats(kind(), batch);
    ASSERT_TRUE(floats.ok());
    const auto logit_count = static_cast<std::size_t>(batch * layout().classes);
    for (std::size_t shift : {1U, 3U, 16U}) {
      // Copies at an offset of `shift` floats into larger buffers.
      std::vector<float> moved_weights(weights.size() + shift);
      std::copy(weights.begin(), weights.end(), moved_weights.begin() + static_cast<long>(shift));
      std::vector<float> moved_inputs(inputs.size() + shift);
      std::copy(inputs.begin(), inputs.end(), moved_inputs.begin() + static_cast<long>(shift));
      std::vector<float> workspace(*floats + shift);
      std::vector<float> logits(logit_count + shift);
      const Status status = Forward(
          kind(), std::span(moved_weights).subspan(shift), std::span(moved_inputs).subspan(shift),
          batch, std::span(workspace).subspan(shift), std::span(logits).subspan(shift));
      ASSERT_TRUE(status.ok()) << status.ToString();
      EXPECT_TRUE(
          std::equal(expected.begin(), expected.end(), logits.begin() + static_cast<long>(shift)))
          << "batch " << batch << ", buffers shifted by " << shift << " floats";
    }
  }
}

TEST_P(ForwardTest, WorkspaceGrowsLinearlyWithTheBatch) {
  auto one = WorkspaceFloats(kind(), 1);
  auto two = WorkspaceFloats(kind(), 2);
  auto many = WorkspaceFloats(kind(), 33);
  ASSERT_TRUE(one.ok() && two.ok() && many.ok());
  const std::size_t per_example = *two - *one;
  EXPECT_GT(per_example, 0U);
  EXPECT_EQ(*many, *one + 32 * per_example);
  auto bytes = WorkspaceBytes(kind(), 33);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, *many * sizeof(float));
  EXPECT_EQ(WorkspaceFloats(kind(), 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkspaceFloats(kind(), kMaxBatch + 1).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(ForwardTest, RejectsMalformedArguments) {
  const std::int64_t batch = 2;
  std::vector<float> inputs = GenerateInputs(layout(), batch, 3);
  auto floats = WorkspaceFloats(kind(), batch);
  ASSERT_TRUE(floats.ok());
  std::vector<float> workspace(*floats);
  std::vector<float> logits(static_cast<std::size_t>(batch * layout().classes));
  const std::vector<float>& weights = WeightsOf(kind());
  const auto code = [&](std::span<const float> w, std::span<const float> in, std::int64_t b,
                        std::span<float> ws,
                        std::span<float> out) { return Forward(kind(), w, in, b, ws, out).code(); };
  EXPECT_EQ(code(weights, inputs, batch, workspace, logits), StatusCode::kOk);
  EXPECT_EQ(code(std::span(weights).first(weights.size() - 1), inputs, batch, workspace, logits),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(weights, std::span(inputs).first(inputs.size() - 1), batch, workspace, logits),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(weights, inputs, 3, workspace, logits), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(weights, inputs, 0, workspace, logits), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(weights, inputs, batch, std::span(workspace).first(workspace.size() - 1), logits),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(weights, inputs, batch, workspace, std::span(logits).first(logits.size() - 1)),
            StatusCode::kInvalidArgument);
  inputs[4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(code(weights, inputs, batch, workspace, logits), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReferenceForward(kind(), weights, inputs, batch).status().code(),
            StatusCode::kInvalidArgument);
  inputs[4] = 2 * kMaxInputMagnitude;
  EXPECT_EQ(code(weights, inputs, batch, workspace, logits), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReferenceForward(kind(), std::span(weights).first(10), inputs, batch).status().code(),
            StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Models, ForwardTest, ::testing::Values(ModelKind::kMlp, ModelKind::kCnn),
                         [](const ::testing::TestParamInfo<ModelKind>& param_info) {
                           return std::string(ModelKindName(param_info.param));
                         });

}  // namespace
}  // namespace gshare::examples
