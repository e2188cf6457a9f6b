#include "gshare/protocol/kserve_json.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gshare/protocol/guarded.h"
#include "gshare/tensor/half.h"

namespace gshare {
namespace {

using Json = nlohmann::json;

// The text is written straight into one string: no JSON tree of the tensors is built (it took 16
// bytes or more per element), and each tensor's "data" comes after its "name", "datatype" and
// "shape", so that a reader that streams (this codec's) can type the elements as they arrive.

// A string as JSON: quoted and escaped; InvalidArgument when it is not valid UTF-8.
Status AppendString(std::string& out, std::string_view text) {
  try {
    out += Json(std::string(text)).dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("cannot write JSON: ") + e.what());
  }
  return Status::Ok();
}

Status AppendJson(std::string& out, const Json& json) {
  try {
    out += json.dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("cannot write JSON: ") + e.what());
  }
  return Status::Ok();
}

// A finite double in its shortest form that reads back as the same double, always with a '.'
// or an exponent (so -0.0 stays negative and every value reads as a floating-point number).
void AppendDouble(std::string& out, double v) {
  char text[40];
  const auto end = fmt::format_to_n(text, sizeof text, "{}", v).out;
  const std::string_view written(text, static_cast<std::size_t>(end - text));
  out += written;
  if (written.find_first_of(".e") == std::string_view::npos) out += ".0";
}

template <typename T>
Status AppendNumbers(std::string& out, const Tensor& tensor) {
  GSHARE_ASSIGN_OR_RETURN(const auto values, tensor.Values<T>());
  out.reserve(out.size() + values.size() * (std::is_floating_point_v<T> ? 8 : 4));
  char text[24];
  bool first = true;
  for (T v : values) {
    if (!first) out += ',';
    first = false;
    if constexpr (std::is_same_v<T, bool>) {
      out += v ? "true" : "false";
    } else if constexpr (std::is_same_v<T, Half> || std::is_floating_point_v<T>) {
      double d = 0;
      if constexpr (std::is_same_v<T, Half>) {
        d = HalfToDouble(v);
      } else {
        d = static_cast<double>(v);
      }
      if (!std::isfinite(d)) {
        return InvalidArgument("tensor '" + tensor.name() + "' holds a non-finite value");
      }
      AppendDouble(out, d);
    } else {
      const auto end = fmt::format_to_n(text, sizeof text, "{}", v).out;
      out.append(text, static_cast<std::size_t>(end - text));
    }
  }
  return Status::Ok();
}

Status AppendData(std::string& out, const Tensor& tensor) {
  out += '[';
  switch (tensor.datatype()) {
    case DataType::kBool:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<bool>(out, tensor));
      break;
    case DataType::kUint8:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<std::uint8_t>(out, tensor));
      break;
    case DataType::kUint16:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<std::uint16_t>(out, tensor));
      break;
    case DataType::kUint32:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<std::uint32_t>(out, tensor));
      break;
    case DataType::kUint64:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<std::uint64_t>(out, tensor));
      break;
    case DataType::kInt8:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<std::int8_t>(out, tensor));
      break;
    case DataType::kInt16:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<std::int16_t>(out, tensor));
      break;
    case DataType::kInt32:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<std::int32_t>(out, tensor));
      break;
    case DataType::kInt64:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<std::int64_t>(out, tensor));
      break;
    case DataType::kFp16:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<Half>(out, tensor));
      break;
    case DataType::kFp32:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<float>(out, tensor));
      break;
    case DataType::kFp64:
      GSHARE_RETURN_IF_ERROR(AppendNumbers<double>(out, tensor));
      break;
    case DataType::kBytes: {
      bool first = true;
      for (const std::string& element : tensor.strings()) {
        if (!first) out += ',';
        first = false;
        GSHARE_RETURN_IF_ERROR(AppendString(out, element));
      }
      break;
    }
  }
  out += ']';
  return Status::Ok();
}

// The bytes of a tensor in the binary data extension: raw little-endian for fixed-size types; for
// BYTES each element's 4-byte little-endian length, then its bytes.
std::uint64_t BinarySize(const Tensor& tensor) {
  if (tensor.datatype() != DataType::kBytes) return tensor.raw_bytes().size();
  std::uint64_t size = 0;
  for (const std::string& element : tensor.strings()) size += 4 + element.size();
  return size;
}

Status AppendBinary(std::string& out, const Tensor& tensor) {
  if (tensor.datatype() != DataType::kBytes) {
    const auto bytes = tensor.raw_bytes();
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return Status::Ok();
  }
  for (const std::string& element : tensor.strings()) {
    if (element.size() > 0xffffffffu) {
      return InvalidArgument("a BYTES element of 4 GiB or more cannot be sent as binary data");
    }
    const auto length = static_cast<std::uint32_t>(element.size());
    for (int b = 0; b < 4; ++b) out += static_cast<char>((length >> (8 * b)) & 0xff);
    out += element;
  }
  return Status::Ok();
}

// `binary`: which tensors are written with binary_data_size in place of their data (null: none).
Status AppendTensors(std::string& out, const std::vector<Tensor>& tensors,
                     const std::function<bool(const std::string&)>* binary = nullptr) {
  out += '[';
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& tensor = tensors[i];
    if (i > 0) out += ',';
    out += "{\"name\":";
    GSHARE_RETURN_IF_ERROR(AppendString(out, tensor.name()));
    out += ",\"datatype\":\"";
    out += DataTypeName(tensor.datatype());
    out += "\",\"shape\":[";
    for (std::size_t d = 0; d < tensor.shape().size(); ++d) {
      if (d > 0) out += ',';
      out += std::to_string(tensor.shape()[d]);
    }
    if (binary != nullptr && (*binary)(tensor.name())) {
      out += "],\"parameters\":{\"binary_data_size\":";
      out += std::to_string(BinarySize(tensor));
      out += "}}";
      continue;
    }
    out += "],\"data\":";
    GSHARE_RETURN_IF_ERROR(AppendData(out, tensor));
    out += '}';
  }
  out += ']';
  return Status::Ok();
}

}  // namespace

namespace {

Result<std::string> WriteRequest(const InferRequest& request,
                                 const std::function<bool(const std::string&)>* binary) {
  return kserve::Guarded([&]() -> Result<std::string> {
    std::string out = "{";
    if (request.id) {
      out += "\"id\":";
      GSHARE_RETURN_IF_ERROR(AppendString(out, *request.id));
      out += ',';
    }
    if (request.parameters) {
      out += "\"parameters\":";
      GSHARE_RETURN_IF_ERROR(AppendJson(out, *request.parameters));
      out += ',';
    }
    if (!request.requested_outputs.empty()) {
      out += "\"outputs\":[";
      for (std::size_t i = 0; i < request.requested_outputs.size(); ++i) {
        const std::string& name = request.requested_outputs[i];
        out += i == 0 ? "{\"name\":" : ",{\"name\":";
        GSHARE_RETURN_IF_ERROR(AppendString(out, name));
        for (const auto& [output, as_binary] : request.output_binary_data) {
          if (output != name) continue;
          out += as_binary ? ",\"parameters\":{\"binary_data\":true}"
                           : ",\"parameters\":{\"binary_data\":false}";
          break;
        }
        out += '}';
      }
      out += "],";
    }
    out += "\"inputs\":";
    GSHARE_RETURN_IF_ERROR(AppendTensors(out, request.inputs, binary));
    out += '}';
    return out;
  });
}

}  // namespace

Result<std::string> SerializeInferRequest(const InferRequest& request) {
  return WriteRequest(request, nullptr);
}

Result<BinaryBody> SerializeInferRequestWithBinary(
    const InferRequest& request, const std::function<bool(const std::string&)>& binary) {
  GSHARE_ASSIGN_OR_RETURN(std::string json, WriteRequest(request, &binary));
  return kserve::Guarded([&]() -> Result<BinaryBody> {
    BinaryBody out;
    out.json_bytes = json.size();
    std::uint64_t total = json.size();
    for (const Tensor& tensor : request.inputs) {
      if (binary(tensor.name())) total += BinarySize(tensor);
    }
    out.body = std::move(json);
    out.body.reserve(static_cast<std::size_t>(total));
    for (const Tensor& tensor : request.inputs) {
      if (binary(tensor.name())) GSHARE_RETURN_IF_ERROR(AppendBinary(out.body, tensor));
    }
    return out;
  });
}

namespace {

Result<std::string> WriteResponse(const InferResponse& response,
                                  const std::function<bool(const std::string&)>* binary) {
  return kserve::Guarded([&]() -> Result<std::string> {
    std::string out = "{\"model_name\":";
    GSHARE_RETURN_IF_ERROR(AppendString(out, response.model_name));
    if (response.model_version) {
      out += ",\"model_version\":";
      GSHARE_RETURN_IF_ERROR(AppendString(out, *response.model_version));
    }
    if (response.id) {
      out += ",\"id\":";
      GSHARE_RETURN_IF_ERROR(AppendString(out, *response.id));
    }
    if (response.parameters) {
      out += ",\"parameters\":";
      GSHARE_RETURN_IF_ERROR(AppendJson(out, *response.parameters));
    }
    out += ",\"outputs\":";
    GSHARE_RETURN_IF_ERROR(AppendTensors(out, response.outputs, binary));
    out += '}';
    return out;
  });
}

}  // namespace

Result<std::string> SerializeInferResponse(const InferResponse& response) {
  return WriteResponse(response, nullptr);
}

Result<BinaryBody> SerializeInferResponseWithBinary(
    const InferResponse& response, const std::function<bool(const std::string&)>& binary) {
  GSHARE_ASSIGN_OR_RETURN(std::string json, WriteResponse(response, &binary));
  return kserve::Guarded([&]() -> Result<BinaryBody> {
    BinaryBody out;
    out.json_bytes = json.size();
    std::uint64_t total = json.size();
    for (const Tensor& tensor : response.outputs) {
      if (binary(tensor.name())) total += BinarySize(tensor);
    }
    out.body = std::move(json);
    out.body.reserve(static_cast<std::size_t>(total));
    for (const Tensor& tensor : response.outputs) {
      if (binary(tensor.name())) GSHARE_RETURN_IF_ERROR(AppendBinary(out.body, tensor));
    }
    return out;
  });
}

std::string ErrorJson(std::string_view message) {
  const Json json = {{"error", std::string(message)}};
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gshare
