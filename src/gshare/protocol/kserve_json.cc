#include "gshare/protocol/kserve_json.h"

#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gshare/protocol/guarded.h"
#include "gshare/tensor/half.h"

namespace gshare {
namespace {

using Json = nlohmann::json;

template <typename T>
Result<Json> NumbersToJson(const Tensor& tensor) {
  Json data = Json::array();
  data.get_ref<Json::array_t&>().reserve(static_cast<std::size_t>(tensor.element_count()));
  GSHARE_ASSIGN_OR_RETURN(const auto values, tensor.Values<T>());
  for (T v : values) {
    if constexpr (std::is_same_v<T, Half>) {
      const double d = HalfToDouble(v);
      if (!std::isfinite(d)) {
        return InvalidArgument("tensor '" + tensor.name() + "' holds a non-finite value");
      }
      data.push_back(d);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v)) {
        return InvalidArgument("tensor '" + tensor.name() + "' holds a non-finite value");
      }
      data.push_back(static_cast<double>(v));
    } else {
      data.push_back(v);
    }
  }
  return data;
}

Result<Json> DataToJson(const Tensor& tensor) {
  switch (tensor.datatype()) {
    case DataType::kBool:
      return NumbersToJson<bool>(tensor);
    case DataType::kUint8:
      return NumbersToJson<std::uint8_t>(tensor);
    case DataType::kUint16:
      return NumbersToJson<std::uint16_t>(tensor);
    case DataType::kUint32:
      return NumbersToJson<std::uint32_t>(tensor);
    case DataType::kUint64:
      return NumbersToJson<std::uint64_t>(tensor);
    case DataType::kInt8:
      return NumbersToJson<std::int8_t>(tensor);
    case DataType::kInt16:
      return NumbersToJson<std::int16_t>(tensor);
    case DataType::kInt32:
      return NumbersToJson<std::int32_t>(tensor);
    case DataType::kInt64:
      return NumbersToJson<std::int64_t>(tensor);
    case DataType::kFp16:
      return NumbersToJson<Half>(tensor);
    case DataType::kFp32:
      return NumbersToJson<float>(tensor);
    case DataType::kFp64:
      return NumbersToJson<double>(tensor);
    case DataType::kBytes:
      return Json(tensor.strings());
  }
  return Internal("unknown datatype");
}

Result<Json> TensorsToJson(const std::vector<Tensor>& tensors) {
  Json array = Json::array();
  for (const Tensor& tensor : tensors) {
    GSHARE_ASSIGN_OR_RETURN(Json data, DataToJson(tensor));
    array.push_back({{"name", tensor.name()},
                     {"datatype", std::string(DataTypeName(tensor.datatype()))},
                     {"shape", tensor.shape()},
                     {"data", std::move(data)}});
  }
  return array;
}

// Dumps `json`; a string that is not valid UTF-8 is an error, never silently altered.
Result<std::string> Dump(const Json& json) {
  try {
    return json.dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("cannot write JSON: ") + e.what());
  }
}

}  // namespace

Result<std::string> SerializeInferRequest(const InferRequest& request) {
  return kserve::Guarded([&]() -> Result<std::string> {
    Json json = Json::object();
    if (request.id) json["id"] = *request.id;
    if (request.parameters) json["parameters"] = *request.parameters;
    GSHARE_ASSIGN_OR_RETURN(json["inputs"], TensorsToJson(request.inputs));
    if (!request.requested_outputs.empty()) {
      Json outputs = Json::array();
      for (const std::string& name : request.requested_outputs) outputs.push_back({{"name", name}});
      json["outputs"] = std::move(outputs);
    }
    return Dump(json);
  });
}

Result<std::string> SerializeInferResponse(const InferResponse& response) {
  return kserve::Guarded([&]() -> Result<std::string> {
    Json json = Json::object();
    json["model_name"] = response.model_name;
    if (response.model_version) json["model_version"] = *response.model_version;
    if (response.id) json["id"] = *response.id;
    if (response.parameters) json["parameters"] = *response.parameters;
    GSHARE_ASSIGN_OR_RETURN(json["outputs"], TensorsToJson(response.outputs));
    return Dump(json);
  });
}

std::string ErrorJson(std::string_view message) {
  const Json json = {{"error", std::string(message)}};
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gshare
