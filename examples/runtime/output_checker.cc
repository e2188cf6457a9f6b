#include "examples/runtime/output_checker.h"

#include <fmt/format.h>

#include "examples/models/compare.h"
#include "examples/models/model_layout.h"
#include "examples/models/reference.h"
#include "examples/models/weights.h"
#include "examples/runtime/example_weights.h"

namespace gshare::examples {
namespace {

constexpr std::uint64_t kInputSeed = 2026;
constexpr std::int64_t kEchoElements = 16;

}  // namespace

Result<std::unique_ptr<OutputChecker>> OutputChecker::Create(const std::string& weights_dir) {
  constexpr ModelKind kAll[] = {ModelKind::kMlp, ModelKind::kCnn};
  return Create(weights_dir, kAll);
}

Result<std::unique_ptr<OutputChecker>> OutputChecker::Create(const std::string& weights_dir,
                                                             std::span<const ModelKind> kinds) {
  std::unique_ptr<OutputChecker> checker(new OutputChecker());
  for (const ModelKind kind : kinds) {
    const std::string name(ModelKindName(kind));
    auto block = LoadExampleWeights(kind, fmt::format("{}/{}.safetensors", weights_dir, name));
    if (!block.ok()) return block.status();
    checker->weights_[name] = std::move(block).value();
  }
  return checker;
}

Result<Tensor> OutputChecker::InputFor(const std::string& model, std::uint64_t index) const {
  const std::uint64_t variant = index % kInputVariants;
  if (model == "echo") {
    std::vector<float> values(kEchoElements);
    for (std::int64_t i = 0; i < kEchoElements; ++i) {
      values[static_cast<std::size_t>(i)] = static_cast<float>(variant * 100 + i);
    }
    return Tensor::FromValues<float>("input", {1, kEchoElements}, values);
  }
  auto kind = ParseModelKind(model);
  if (!kind.ok()) return kind.status();
  const ModelLayout& layout = LayoutOf(*kind);
  // One example per variant: the variant's own draw from the stream.
  const std::vector<float> values = GenerateInputs(layout, 1, kInputSeed + variant);
  std::vector<std::int64_t> shape = {1};
  shape.insert(shape.end(), layout.input_shape.begin(), layout.input_shape.end());
  return Tensor::FromValues<float>("input", shape, values);
}

Status OutputChecker::Check(const std::string& model, std::uint64_t index, const Tensor& output) {
  auto input = InputFor(model, index);
  if (!input.ok()) return input.status();
  if (model == "echo") {
    if (output.datatype() != input->datatype() || output.shape() != input->shape() ||
        !std::equal(output.raw_bytes().begin(), output.raw_bytes().end(),
                    input->raw_bytes().begin(), input->raw_bytes().end())) {
      return InvalidArgument("echo answered something other than its input");
    }
    return Status::Ok();
  }
  const ModelKind kind = *ParseModelKind(model);
  const ModelLayout& layout = LayoutOf(kind);
  const auto weights = weights_.find(model);
  if (weights == weights_.end()) {
    return FailedPrecondition(fmt::format("the checker has not loaded the {} weights", model));
  }
  const auto key = std::make_pair(model, index % kInputVariants);
  auto cached = references_.find(key);
  if (cached == references_.end()) {
    auto reference = ReferenceForward(kind, weights->second, *input->Values<float>(), 1);
    if (!reference.ok()) return reference.status();
    cached = references_.emplace(key, std::move(reference).value()).first;
  }
  if (output.name() != "logits" || output.shape() != std::vector<std::int64_t>{1, layout.classes}) {
    return InvalidArgument(fmt::format("{} answered {} of shape {}, not logits [1, {}]", model,
                                       output.name(), ShapeToString(output.shape()),
                                       layout.classes));
  }
  auto values = output.Values<float>();
  if (!values.ok()) return values.status();
  auto comparison = CompareOutputs(*values, cached->second, layout.classes);
  if (!comparison.ok()) return comparison.status();
  if (!comparison->within_tolerance) {
    return InvalidArgument(fmt::format("{}: {}", model, comparison->ToString()));
  }
  return Status::Ok();
}

}  // namespace gshare::examples
