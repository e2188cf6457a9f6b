#include "examples/models/model_layout.h"

#include <fmt/format.h>

namespace gshare::examples {
namespace {

void AddLinear(ModelLayout& layout, const std::string& name, std::int64_t in, std::int64_t out) {
  layout.parameters.push_back({name + ".weight", {out, in}, in, false});
  layout.parameters.push_back({name + ".bias", {out}, in, true});
}

void AddConv(ModelLayout& layout, const std::string& name, std::int64_t in, std::int64_t out) {
  const std::int64_t k = CnnDims::kKernel;
  layout.parameters.push_back({name + ".weight", {out, in, k, k}, in * k * k, false});
  layout.parameters.push_back({name + ".bias", {out}, in * k * k, true});
}

ModelLayout BuildMlp() {
  ModelLayout layout{ModelKind::kMlp, "mlp", {1, 28, 28}, MlpDims::kClasses, {}};
  AddLinear(layout, "fc1", MlpDims::kInput, MlpDims::kHidden);
  AddLinear(layout, "fc2", MlpDims::kHidden, MlpDims::kHidden);
  AddLinear(layout, "fc3", MlpDims::kHidden, MlpDims::kClasses);
  return layout;
}

ModelLayout BuildCnn() {
  using D = CnnDims;
  ModelLayout layout{
      ModelKind::kCnn, "cnn", {D::kInputChannels, D::kInputSize, D::kInputSize}, D::kClasses, {}};
  AddConv(layout, "conv1", D::kInputChannels, D::kConv1Channels);
  AddConv(layout, "conv2", D::kConv1Channels, D::kConv2Channels);
  AddConv(layout, "conv3", D::kConv2Channels, D::kConv3Channels);
  AddLinear(layout, "fc1", D::kFeatures, D::kHidden);
  AddLinear(layout, "fc2", D::kHidden, D::kClasses);
  return layout;
}

std::int64_t Product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::int64_t ParameterSpec::elements() const { return Product(shape); }

std::int64_t ModelLayout::input_elements() const { return Product(input_shape); }

std::int64_t ModelLayout::parameter_count() const {
  std::int64_t n = 0;
  for (const ParameterSpec& p : parameters) n += p.elements();
  return n;
}

Result<std::size_t> ModelLayout::IndexOf(std::string_view parameter_name) const {
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i].name == parameter_name) return i;
  }
  return NotFound(fmt::format("model '{}' has no parameter '{}'", name, parameter_name));
}

std::int64_t ModelLayout::OffsetOf(std::size_t index) const {
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < index && i < parameters.size(); ++i) {
    offset += parameters[i].elements();
  }
  return offset;
}

const ModelLayout& MlpLayout() {
  static const ModelLayout layout = BuildMlp();
  return layout;
}

const ModelLayout& CnnLayout() {
  static const ModelLayout layout = BuildCnn();
  return layout;
}

const ModelLayout& LayoutOf(ModelKind kind) {
  return kind == ModelKind::kMlp ? MlpLayout() : CnnLayout();
}

std::string_view ModelKindName(ModelKind kind) { return kind == ModelKind::kMlp ? "mlp" : "cnn"; }

Result<ModelKind> ParseModelKind(std::string_view model_name) {
  if (model_name == "mlp") return ModelKind::kMlp;
  if (model_name == "cnn") return ModelKind::kCnn;
  return InvalidArgument(
      fmt::format("unknown example model '{}' (expected 'mlp' or 'cnn')", model_name));
}

}  // namespace gshare::examples
