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

Result<std::vector<float>> SeedExampleWeights(ModelKind kind, std::uint64_t seed) {
  const ModelLayout& layout = LayoutOf(kind);
  return PackWeights(layout, GenerateWeights(layout, seed));
}

Result<std::vector<std::string>> EnsureExampleWeights(const std::filesystem::path& folder) {
  std::vector<std::string> written;
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) return IoError(fmt::format("cannot create {}: {}", folder.string(), error.message()));
  for (const ModelKind kind : {ModelKind::kMlp, ModelKind::kCnn}) {
    const std::filesystem::path path = folder / fmt::format("{}.safetensors", ModelKindName(kind));
    if (std::filesystem::exists(path, error)) continue;
    GSHARE_RETURN_IF_ERROR(WriteExampleWeights(kind, kDefaultWeightSeed, path.string()));
    written.push_back(path.string());
  }
  return written;
}

}  // namespace gshare::examples
