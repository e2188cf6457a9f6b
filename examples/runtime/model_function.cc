#include "examples/runtime/model_function.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "examples/models/forward.h"
#include "examples/runtime/example_weights.h"

namespace gshare::examples {
namespace {

constexpr std::uint64_t kEchoStateBytes = 1 << 20;

// "[batch, 3, 32, 32]"
std::string BatchedShape(const ModelLayout& layout) {
  return fmt::format("[batch, {}]", fmt::join(layout.input_shape, ", "));
}

// Accepts [batch, <input shape>] or [batch, <input elements>]; returns the batch.
Result<std::int64_t> BatchOf(const Tensor& input, const ModelLayout& layout) {
  const std::vector<std::int64_t>& shape = input.shape();
  if (input.datatype() != DataType::kFp32 || shape.empty()) {
    return InvalidArgument(fmt::format("model '{}' takes one FP32 input of shape {}", layout.name,
                                       BatchedShape(layout)));
  }
  const bool nested = shape.size() == layout.input_shape.size() + 1 &&
                      std::equal(shape.begin() + 1, shape.end(), layout.input_shape.begin());
  const bool flat = shape.size() == 2 && shape[1] == layout.input_elements();
  if (!nested && !flat) {
    return InvalidArgument(fmt::format("model '{}' takes shape {}, not {}", layout.name,
                                       BatchedShape(layout), ShapeToString(shape)));
  }
  if (shape[0] < 1 || shape[0] > kMaxBatch) {
    return InvalidArgument(fmt::format("a batch of {} is outside [1, {}]", shape[0], kMaxBatch));
  }
  return shape[0];
}

}  // namespace

Result<std::unique_ptr<ModelFunction>> ModelFunction::Create(fn::FunctionRuntime& runtime,
                                                             const std::string& model,
                                                             const std::string& weights_path,
                                                             bool freeze) {
  std::unique_ptr<ModelFunction> function(new ModelFunction(runtime, model));
  if (model == "echo") {
    auto state = runtime.Allocate(kEchoStateBytes, "echo state");
    if (!state.ok()) return state.status();
    function->weights_ = std::move(state).value();
    GSHARE_RETURN_IF_ERROR(runtime.Launch(
        [&] { std::memset(function->weights_.data(), 0, function->weights_.size_bytes()); }));
    runtime.EndWork();
    if (freeze) {
      GSHARE_RETURN_IF_ERROR(runtime.memory().Freeze());
    }
    return function;
  }
  auto kind = ParseModelKind(model);
  if (!kind.ok()) return kind.status();
  function->layout_ = &LayoutOf(*kind);
  // Without a file, the bundled weights (the default seed's).
  auto block = weights_path.empty() ? SeedExampleWeights(*kind, kDefaultWeightSeed)
                                    : LoadExampleWeights(*kind, weights_path);
  if (!block.ok()) return block.status();
  auto weights = runtime.Allocate(block->size() * sizeof(float), "weights");
  if (!weights.ok()) return weights.status();
  function->weights_ = std::move(weights).value();
  GSHARE_RETURN_IF_ERROR(runtime.Launch([&] {
    std::memcpy(function->weights_.data(), block->data(), block->size() * sizeof(float));
  }));
  runtime.EndWork();
  if (freeze) {
    GSHARE_RETURN_IF_ERROR(runtime.memory().Freeze());
  }
  return function;
}

ModelTensors ModelFunction::tensors() const {
  if (layout_ == nullptr) return {};
  std::vector<std::int64_t> input_shape = {-1};
  input_shape.insert(input_shape.end(), layout_->input_shape.begin(), layout_->input_shape.end());
  return {.inputs = {{"input", DataType::kFp32, std::move(input_shape)}},
          .outputs = {{"logits", DataType::kFp32, {-1, layout_->classes}}}};
}

Result<Tensor> ModelFunction::Infer(const Tensor& input) {
  if (layout_ == nullptr) {  // echo: touches its state on the GPU, answers its input
    std::uint64_t sum = 0;
    GSHARE_RETURN_IF_ERROR(
        runtime_.Launch([&] { sum += std::to_integer<std::uint64_t>(weights_.data()[0]); }));
    runtime_.EndWork();
    (void)sum;
    Tensor output = input;
    return std::move(output).Renamed("output");
  }
  auto batch = BatchOf(input, *layout_);
  if (!batch.ok()) return batch.status();
  auto values = input.Values<float>();
  if (!values.ok()) return values.status();
  auto workspace_bytes = WorkspaceBytes(layout_->kind, *batch);
  if (!workspace_bytes.ok()) return workspace_bytes.status();
  const auto logits_floats = static_cast<std::size_t>(*batch * layout_->classes);
  auto inputs = runtime_.Allocate(values->size_bytes(), "the batch's inputs");
  if (!inputs.ok()) return inputs.status();
  auto workspace = runtime_.Allocate(*workspace_bytes, "the batch's workspace");
  if (!workspace.ok()) return workspace.status();
  auto logits = runtime_.Allocate(logits_floats * sizeof(float), "the batch's logits");
  if (!logits.ok()) return logits.status();

  std::vector<float> host_logits(logits_floats);
  Status ran;
  const std::span<const float> weights(weights_.as<const float>(),
                                       static_cast<std::size_t>(layout_->parameter_count()));
  GSHARE_RETURN_IF_ERROR(runtime_.Launch([&] {
    std::memcpy(inputs->data(), values->data(), values->size_bytes());
    ran = Forward(layout_->kind, weights,
                  std::span<const float>(inputs->as<const float>(), values->size()), *batch,
                  std::span<float>(workspace->as<float>(), *workspace_bytes / sizeof(float)),
                  std::span<float>(logits->as<float>(), logits_floats));
    std::memcpy(host_logits.data(), logits->data(), logits_floats * sizeof(float));
  }));
  runtime_.EndWork();
  GSHARE_RETURN_IF_ERROR(ran);
  return Tensor::FromValues<float>("logits", {*batch, layout_->classes}, host_logits);
}

}  // namespace gshare::examples
