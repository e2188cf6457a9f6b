#include "gshare/protocol/kserve_json.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gshare/tensor/half.h"
#include "gshare/tensor/json_depth.h"

namespace gshare {
namespace {

using Json = nlohmann::json;

// What the tensors of one message may still use of the limits.
struct Budget {
  std::uint64_t bytes_left;
  std::uint64_t elements_left;
};

Result<Json> ParseObject(std::string_view text, const ParseLimits& limits, std::string_view what) {
  if (text.size() > limits.max_text_bytes) {
    return InvalidArgument(fmt::format("{} of {} bytes exceeds the limit of {} bytes", what,
                                       text.size(), limits.max_text_bytes));
  }
  GSHARE_RETURN_IF_ERROR(CheckJsonNesting(text, limits.max_depth));
  Json json = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return InvalidArgument(std::string(what) + " is not valid JSON");
  if (!json.is_object()) return InvalidArgument(std::string(what) + " is not a JSON object");
  return json;
}

// The string at `key`, nullopt when absent; InvalidArgument when present but not a string.
Result<std::optional<std::string>> OptionalString(const Json& object, const char* key,
                                                  std::string_view where) {
  const auto it = object.find(key);
  if (it == object.end()) return std::optional<std::string>();
  if (!it->is_string()) return InvalidArgument(fmt::format("{}'{}' is not a string", where, key));
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::optional<Json>> OptionalParameters(const Json& object, std::string_view where) {
  const auto it = object.find("parameters");
  if (it == object.end()) return std::optional<Json>();
  if (!it->is_object())
    return InvalidArgument(fmt::format("{}'parameters' is not an object", where));
  return std::optional<Json>(*it);
}

template <typename T>
std::optional<T> ToInteger(const Json& value) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v);
  }
  if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    if constexpr (std::is_signed_v<T>) {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
        return std::nullopt;
      }
      return static_cast<T>(v);
    } else {
      if (v < 0 || static_cast<std::uint64_t>(v) > std::numeric_limits<T>::max()) {
        return std::nullopt;
      }
      return static_cast<T>(v);
    }
  }
  return std::nullopt;
}

// Appends elements of one tensor, checked for its datatype, to its storage.
class ElementSink {
 public:
  ElementSink(std::string where, DataType type, std::size_t reserve_elements)
      : where_(std::move(where)), type_(type) {
    if (IsFixedSize(type)) {
      bytes_.reserve(reserve_elements * ElementSizeBytes(type));
    } else {
      strings_.reserve(reserve_elements);
    }
  }

  Status Append(const Json& value, Budget& budget) {
    switch (type_) {
      case DataType::kBool:
        if (!value.is_boolean()) return Error("true or false");
        Put(static_cast<std::uint8_t>(value.get<bool>() ? 1 : 0));
        break;
      case DataType::kUint8:
        return AppendInteger<std::uint8_t>(value);
      case DataType::kUint16:
        return AppendInteger<std::uint16_t>(value);
      case DataType::kUint32:
        return AppendInteger<std::uint32_t>(value);
      case DataType::kUint64:
        return AppendInteger<std::uint64_t>(value);
      case DataType::kInt8:
        return AppendInteger<std::int8_t>(value);
      case DataType::kInt16:
        return AppendInteger<std::int16_t>(value);
      case DataType::kInt32:
        return AppendInteger<std::int32_t>(value);
      case DataType::kInt64:
        return AppendInteger<std::int64_t>(value);
      case DataType::kFp16: {
        if (!value.is_number()) return Error("a number");
        const auto half = DoubleToHalf(value.get<double>());
        if (!half) return Error("a number within FP16's range (|x| < 65520)");
        Put(half->bits);
        break;
      }
      case DataType::kFp32: {
        if (!value.is_number()) return Error("a number");
        const double v = value.get<double>();
        if (!std::isfinite(v) || std::fabs(v) > static_cast<double>(FLT_MAX)) {
          return Error("a number within FP32's range");
        }
        Put(static_cast<float>(v));
        break;
      }
      case DataType::kFp64: {
        if (!value.is_number()) return Error("a number");
        const double v = value.get<double>();
        if (!std::isfinite(v)) return Error("a finite number");
        Put(v);
        break;
      }
      case DataType::kBytes: {
        if (!value.is_string()) return Error("a string");
        const auto& s = value.get_ref<const std::string&>();
        if (s.size() > budget.bytes_left) {
          return InvalidArgument(where_ + ": data exceeds the limit on tensor bytes");
        }
        budget.bytes_left -= s.size();
        strings_.push_back(s);
        break;
      }
    }
    ++index_;
    return Status::Ok();
  }

  std::size_t count() const { return index_; }
  std::vector<std::byte> TakeBytes() { return std::move(bytes_); }
  std::vector<std::string> TakeStrings() { return std::move(strings_); }

 private:
  template <typename T>
  Status AppendInteger(const Json& value) {
    const auto v = ToInteger<T>(value);
    if (!v) {
      return Error(fmt::format("an integer in [{}, {}]", std::numeric_limits<T>::min(),
                               std::numeric_limits<T>::max()));
    }
    Put(*v);
    ++index_;
    return Status::Ok();
  }

  template <typename T>
  void Put(T value) {
    std::byte raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));  // the host is little-endian (tensor.h)
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
  }

  Status Error(std::string_view expected) const {
    return InvalidArgument(fmt::format("{}: data element {} is not valid for {} (expected {})",
                                       where_, index_, DataTypeName(type_), expected));
  }

  std::string where_;
  DataType type_;
  std::size_t index_ = 0;
  std::vector<std::byte> bytes_;
  std::vector<std::string> strings_;
};

// Walks data nested as `shape` from dimension `dim`; recursion is bounded by the JSON nesting,
// which the text check limited.
Status ReadNested(const Json& data, std::span<const std::int64_t> shape, std::size_t dim,
                  ElementSink& sink, Budget& budget, const std::string& where) {
  const std::string mismatch = where + ": nested data does not match shape " + ShapeToString(shape);
  if (dim >= shape.size() || !data.is_array() ||
      data.size() != static_cast<std::uint64_t>(shape[dim])) {
    return InvalidArgument(mismatch);
  }
  for (const Json& element : data) {
    if (dim + 1 == shape.size()) {
      if (element.is_array()) return InvalidArgument(mismatch);
      GSHARE_RETURN_IF_ERROR(sink.Append(element, budget));
    } else {
      GSHARE_RETURN_IF_ERROR(ReadNested(element, shape, dim + 1, sink, budget, where));
    }
  }
  return Status::Ok();
}

Result<Tensor> ParseTensor(const Json& json, const std::string& role, std::size_t index,
                           Budget& budget) {
  std::string where = fmt::format("{} {}", role, index);
  if (!json.is_object()) return InvalidArgument(where + " is not an object");
  const auto name_it = json.find("name");
  if (name_it == json.end() || !name_it->is_string() ||
      name_it->get_ref<const std::string&>().empty()) {
    return InvalidArgument(where + ": 'name' is missing, not a string, or empty");
  }
  std::string name = name_it->get<std::string>();
  where = fmt::format("{} '{}'", role, name.substr(0, 128));
  const auto type_it = json.find("datatype");
  if (type_it == json.end() || !type_it->is_string()) {
    return InvalidArgument(where + ": 'datatype' is missing or not a string");
  }
  auto type = ParseDataType(type_it->get_ref<const std::string&>());
  if (!type.ok()) return type.status().WithContext(where);
  const auto shape_it = json.find("shape");
  if (shape_it == json.end() || !shape_it->is_array()) {
    return InvalidArgument(where + ": 'shape' is missing or not an array");
  }
  if (shape_it->size() > Tensor::kMaxRank) {
    return InvalidArgument(fmt::format("{}: shape has {} dimensions (at most {})", where,
                                       shape_it->size(), Tensor::kMaxRank));
  }
  std::vector<std::int64_t> shape;
  for (const Json& dim : *shape_it) {
    const auto d = ToInteger<std::int64_t>(dim);
    if (!d || *d < 0) {
      return InvalidArgument(where + ": shape dimensions must be non-negative integers");
    }
    shape.push_back(*d);
  }
  auto count = ElementCount(shape);
  if (!count.ok()) return count.status().WithContext(where);
  const auto elements = static_cast<std::uint64_t>(*count);
  if (elements > budget.elements_left) {
    return InvalidArgument(fmt::format("{}: shape {} exceeds the limit on tensor elements", where,
                                       ShapeToString(shape)));
  }
  budget.elements_left -= elements;
  if (IsFixedSize(*type)) {
    // elements <= max_elements, so the product cannot overflow 64 bits
    const std::uint64_t bytes = elements * ElementSizeBytes(*type);
    if (bytes > budget.bytes_left) {
      return InvalidArgument(fmt::format("{}: shape {} exceeds the limit on tensor bytes", where,
                                         ShapeToString(shape)));
    }
    budget.bytes_left -= bytes;
  }
  if (const auto params = json.find("parameters"); params != json.end()) {
    if (!params->is_object()) return InvalidArgument(where + ": 'parameters' is not an object");
    if (params->contains("binary_data_size")) {
      return InvalidArgument(where + ": binary tensor data is not supported; send 'data' as JSON");
    }
  }
  const auto data_it = json.find("data");
  if (data_it == json.end()) return InvalidArgument(where + ": 'data' is missing");
  if (!data_it->is_array()) return InvalidArgument(where + ": 'data' is not an array");
  const Json& data = *data_it;
  ElementSink sink(where, *type, static_cast<std::size_t>(elements));
  bool nested = false;
  for (const Json& element : data) nested = nested || element.is_array();
  if (nested) {
    GSHARE_RETURN_IF_ERROR(ReadNested(data, shape, 0, sink, budget, where));
  } else {
    if (data.size() != elements) {
      return InvalidArgument(fmt::format("{}: shape {} has {} elements but data has {}", where,
                                         ShapeToString(shape), elements, data.size()));
    }
    for (const Json& element : data) GSHARE_RETURN_IF_ERROR(sink.Append(element, budget));
  }
  if (*type == DataType::kBytes) {
    return Tensor::FromStrings(std::move(name), std::move(shape), sink.TakeStrings());
  }
  return Tensor::FromBytes(std::move(name), *type, std::move(shape), sink.TakeBytes());
}

Result<std::vector<Tensor>> ParseTensors(const Json& message, const char* key,
                                         const std::string& role, const ParseLimits& limits) {
  const auto it = message.find(key);
  if (it == message.end() || !it->is_array()) {
    return InvalidArgument(fmt::format("'{}' is missing or not an array", key));
  }
  if (it->size() > limits.max_tensors) {
    return InvalidArgument(
        fmt::format("{} {}s exceed the limit of {}", it->size(), role, limits.max_tensors));
  }
  Budget budget{limits.max_tensor_bytes, limits.max_elements};
  std::vector<Tensor> tensors;
  std::set<std::string> names;
  for (std::size_t i = 0; i < it->size(); ++i) {
    GSHARE_ASSIGN_OR_RETURN(Tensor tensor, ParseTensor((*it)[i], role, i, budget));
    if (!names.insert(tensor.name()).second) {
      return InvalidArgument(fmt::format("two {}s are named '{}'", role, tensor.name()));
    }
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

Result<InferRequest> ParseRequestUnguarded(std::string_view text, const ParseLimits& limits) {
  GSHARE_ASSIGN_OR_RETURN(const Json json, ParseObject(text, limits, "request body"));
  InferRequest request;
  GSHARE_ASSIGN_OR_RETURN(request.id, OptionalString(json, "id", ""));
  GSHARE_ASSIGN_OR_RETURN(request.parameters, OptionalParameters(json, ""));
  GSHARE_ASSIGN_OR_RETURN(request.inputs, ParseTensors(json, "inputs", "input", limits));
  if (const auto outputs = json.find("outputs"); outputs != json.end()) {
    if (!outputs->is_array()) return InvalidArgument("'outputs' is not an array");
    if (outputs->size() > limits.max_tensors) {
      return InvalidArgument(fmt::format("{} requested outputs exceed the limit of {}",
                                         outputs->size(), limits.max_tensors));
    }
    std::set<std::string> names;
    for (std::size_t i = 0; i < outputs->size(); ++i) {
      const Json& output = (*outputs)[i];
      const std::string where = fmt::format("requested output {}", i);
      if (!output.is_object()) return InvalidArgument(where + " is not an object");
      const auto name = output.find("name");
      if (name == output.end() || !name->is_string() ||
          name->get_ref<const std::string&>().empty()) {
        return InvalidArgument(where + ": 'name' is missing, not a string, or empty");
      }
      if (!names.insert(name->get<std::string>()).second) {
        return InvalidArgument("output '" + name->get<std::string>() + "' is requested twice");
      }
      if (const auto p = output.find("parameters"); p != output.end() && !p->is_object()) {
        return InvalidArgument(where + ": 'parameters' is not an object");
      }
      request.requested_outputs.push_back(name->get<std::string>());
    }
  }
  return request;
}

Result<InferResponse> ParseResponseUnguarded(std::string_view text, const ParseLimits& limits) {
  GSHARE_ASSIGN_OR_RETURN(const Json json, ParseObject(text, limits, "response body"));
  InferResponse response;
  GSHARE_ASSIGN_OR_RETURN(const auto model_name, OptionalString(json, "model_name", ""));
  if (!model_name) return InvalidArgument("'model_name' is missing");
  response.model_name = *model_name;
  GSHARE_ASSIGN_OR_RETURN(response.model_version, OptionalString(json, "model_version", ""));
  GSHARE_ASSIGN_OR_RETURN(response.id, OptionalString(json, "id", ""));
  GSHARE_ASSIGN_OR_RETURN(response.parameters, OptionalParameters(json, ""));
  GSHARE_ASSIGN_OR_RETURN(response.outputs, ParseTensors(json, "outputs", "output", limits));
  return response;
}

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

template <typename F>
auto Guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory handling an inference message");
  } catch (const std::exception& e) {
    return Internal(std::string("inference message: ") + e.what());
  }
}

}  // namespace

Result<InferRequest> ParseInferRequest(std::string_view json, const ParseLimits& limits) {
  return Guarded([&] { return ParseRequestUnguarded(json, limits); });
}

Result<InferResponse> ParseInferResponse(std::string_view json, const ParseLimits& limits) {
  return Guarded([&] { return ParseResponseUnguarded(json, limits); });
}

Result<std::string> SerializeInferRequest(const InferRequest& request) {
  return Guarded([&]() -> Result<std::string> {
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
  return Guarded([&]() -> Result<std::string> {
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
