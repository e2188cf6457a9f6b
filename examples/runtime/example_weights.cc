#include "examples/runtime/example_weights.h"

#include <fmt/format.h>

#include "gshare/tensor/safetensors.h"

namespace gshare::examples {

Status WriteExampleWeights(ModelKind kind, std::uint64_t seed, const std::string& path) {
  const ModelLayout& layout = LayoutOf(kind);
  std::vector<Tensor> tensors;
  for (const NamedArray& array : GenerateWeights(layout, seed)) {
    auto tensor = Tensor::FromValues<float>(array.name, array.shape, array.values);
    if (!tensor.ok()) return tensor.status();
    tensors.push_back(std::move(tensor).value());
  }
  return WriteSafetensorsFile(path, tensors,
                              {{"model", layout.name}, {"seed", std::to_string(seed)}});
}

Result<std::vector<float>> LoadExampleWeights(ModelKind kind, const std::string& path) {
  auto file = ReadSafetensorsFile(path);
  if (!file.ok()) return file.status();
  std::vector<NamedArray> arrays;
  for (const Tensor& tensor : file->tensors) {
    auto values = tensor.Values<float>();
    if (!values.ok()) {
      return InvalidArgument(fmt::format("{}: {}", path, values.status().message()));
    }
    arrays.push_back({tensor.name(), tensor.shape(), {values->begin(), values->end()}});
  }
  auto block = PackWeights(LayoutOf(kind), arrays);
  if (!block.ok()) return InvalidArgument(fmt::format("{}: {}", path, block.status().message()));
  return block;
}

}  // namespace gshare::examples
