#include "gshare/protocol/model_metadata.h"

#include <fmt/format.h>

#include "gshare/tensor/json_depth.h"

namespace gshare {
namespace {

// The metadata's nesting: the object, its lists, a tensor, its shape.
constexpr std::size_t kMaxMetadataDepth = 8;

Result<std::vector<TensorSpec>> ParseList(const nlohmann::json& object, const char* field,
                                          bool batched) {
  std::vector<TensorSpec> specs;
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) return specs;
  if (!it->is_array()) return InvalidArgument(fmt::format("'{}' is not an array", field));
  if (it->size() > kMaxTensorSpecs) {
    return InvalidArgument(
        fmt::format("'{}' has {} tensors; at most {}", field, it->size(), kMaxTensorSpecs));
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& entry = (*it)[i];
    const auto name = entry.is_object() ? entry.find("name") : entry.end();
    const auto datatype = entry.is_object() ? entry.find("datatype") : entry.end();
    const auto shape = entry.is_object() ? entry.find("shape") : entry.end();
    if (!entry.is_object() || name == entry.end() || !name->is_string() ||
        datatype == entry.end() || !datatype->is_string() || shape == entry.end() ||
        !shape->is_array()) {
      return InvalidArgument(fmt::format(
          "{}[{}] is not an object with a string 'name', a string 'datatype' and a 'shape' array",
          field, i));
    }
    TensorSpec spec;
    spec.name = name->get<std::string>();
    auto type = ParseDataType(datatype->get<std::string>());
    if (!type.ok())
      return InvalidArgument(fmt::format("{}[{}]: {}", field, i, type.status().message()));
    spec.datatype = *type;
    if (shape->size() > kMaxTensorSpecRank) {
      return InvalidArgument(fmt::format("{}[{}]: the shape has {} dimensions; at most {}", field,
                                         i, shape->size(), kMaxTensorSpecRank));
    }
    for (const nlohmann::json& dim : *shape) {
      if (!dim.is_number_integer()) {
        return InvalidArgument(fmt::format("{}[{}]: a dimension is not an integer", field, i));
      }
      // Unsigned values past int64 are refused below as out of range, not wrapped.
      if (dim.is_number_unsigned() && dim.get<std::uint64_t>() > std::uint64_t(kMaxTensorSpecDim)) {
        return InvalidArgument(fmt::format("{}[{}]: a dimension is above 2^40", field, i));
      }
      spec.shape.push_back(dim.get<std::int64_t>());
    }
    specs.push_back(std::move(spec));
  }
  GSHARE_RETURN_IF_ERROR(CheckTensorSpecs(specs, field, batched));
  return specs;
}

}  // namespace

nlohmann::json TensorSpecsJson(std::span<const TensorSpec> specs) {
  nlohmann::json out = nlohmann::json::array();
  for (const TensorSpec& spec : specs) {
    out.push_back({{"name", spec.name},
                   {"datatype", std::string(DataTypeName(spec.datatype))},
                   {"shape", spec.shape}});
  }
  return out;
}

Result<ModelTensors> ParseModelMetadataTensors(std::string_view json, bool batched) {
  if (json.size() > kMaxModelMetadataBytes) {
    return InvalidArgument(
        fmt::format("the metadata is {} bytes; at most {}", json.size(), kMaxModelMetadataBytes));
  }
  GSHARE_RETURN_IF_ERROR(CheckJsonNesting(json, kMaxMetadataDepth));
  const nlohmann::json object = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return InvalidArgument("the metadata is not a JSON object");
  ModelTensors tensors;
  GSHARE_ASSIGN_OR_RETURN(tensors.inputs, ParseList(object, "inputs", batched));
  GSHARE_ASSIGN_OR_RETURN(tensors.outputs, ParseList(object, "outputs", batched));
  return tensors;
}

}  // namespace gshare
