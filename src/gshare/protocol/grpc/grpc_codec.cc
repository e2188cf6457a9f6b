#include "gshare/protocol/grpc/grpc_codec.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include "gshare/tensor/tensor.h"

namespace gshare {
namespace {

using Parameters = google::protobuf::Map<std::string, inference::InferParameter>;

Result<nlohmann::json> ParametersJson(const Parameters& parameters, std::size_t& values,
                                      const ParseLimits& limits) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [name, value] : parameters) {
    if (++values > limits.max_parameter_values) {
      return InvalidArgument(
          fmt::format("more than {} parameter values", limits.max_parameter_values));
    }
    switch (value.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam:
        object[name] = value.bool_param();
        break;
      case inference::InferParameter::kInt64Param:
        object[name] = value.int64_param();
        break;
      case inference::InferParameter::kUint64Param:
        object[name] = value.uint64_param();
        break;
      case inference::InferParameter::kDoubleParam:
        if (!std::isfinite(value.double_param())) {
          return InvalidArgument(fmt::format("parameter '{}' is not a finite number", name));
        }
        object[name] = value.double_param();
        break;
      case inference::InferParameter::kStringParam:
        object[name] = value.string_param();
        break;
      default:
        return InvalidArgument(fmt::format("parameter '{}' has no value", name));
    }
  }
  return object;
}

// How many values the contents hold, across every field.
std::size_t ContentsCount(const inference::InferTensorContents& c) {
  return static_cast<std::size_t>(c.bool_contents_size() + c.int_contents_size() +
                                  c.int64_contents_size() + c.uint_contents_size() +
                                  c.uint64_contents_size() + c.fp32_contents_size() +
                                  c.fp64_contents_size() + c.bytes_contents_size());
}

template <typename T, typename Field>
Result<std::vector<std::byte>> Narrowed(const Field& values, const std::string& name) {
  std::vector<std::byte> bytes(static_cast<std::size_t>(values.size()) * sizeof(T));
  for (int i = 0; i < values.size(); ++i) {
    const auto value = values.Get(i);
    if (!std::in_range<T>(value)) {
      return InvalidArgument(fmt::format(
          "input '{}': element {} ({}) is out of its datatype's range", name, i, value));
    }
    const T narrowed = static_cast<T>(value);
    std::memcpy(bytes.data() + static_cast<std::size_t>(i) * sizeof(T), &narrowed, sizeof(T));
  }
  return bytes;
}

template <typename Field>
std::vector<std::byte> Copied(const Field& values) {
  std::vector<std::byte> bytes(static_cast<std::size_t>(values.size()) *
                               sizeof(typename Field::value_type));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The tensor from the contents field of its datatype.
Result<Tensor> FromContents(const inference::ModelInferRequest::InferInputTensor& input,
                            DataType type, std::vector<std::int64_t> shape, std::int64_t count) {
  const inference::InferTensorContents& c = input.contents();
  const std::string& name = input.name();
  const auto field_count = [&]() -> std::int64_t {
    switch (type) {
      case DataType::kBool:
        return c.bool_contents_size();
      case DataType::kInt8:
      case DataType::kInt16:
      case DataType::kInt32:
        return c.int_contents_size();
      case DataType::kInt64:
        return c.int64_contents_size();
      case DataType::kUint8:
      case DataType::kUint16:
      case DataType::kUint32:
        return c.uint_contents_size();
      case DataType::kUint64:
        return c.uint64_contents_size();
      case DataType::kFp32:
        return c.fp32_contents_size();
      case DataType::kFp64:
        return c.fp64_contents_size();
      case DataType::kBytes:
        return c.bytes_contents_size();
      case DataType::kFp16:
        return 0;
    }
    return 0;
  }();
  if (type == DataType::kFp16 && count > 0) {
    return InvalidArgument(
        fmt::format("input '{}': FP16 has no contents field; send it in raw_input_contents", name));
  }
  if (static_cast<std::size_t>(field_count) != ContentsCount(c)) {
    return InvalidArgument(fmt::format("input '{}': its contents are in a field other than {}'s",
                                       name, DataTypeName(type)));
  }
  if (field_count != count) {
    return InvalidArgument(fmt::format("input '{}': {} values for shape {} ({} elements)", name,
                                       field_count, ShapeToString(shape), count));
  }
  std::string text_name = name;
  Result<std::vector<std::byte>> bytes = std::vector<std::byte>();
  switch (type) {
    case DataType::kBool: {
      std::vector<std::byte> out(static_cast<std::size_t>(count));
      for (int i = 0; i < c.bool_contents_size(); ++i) {
        out[static_cast<std::size_t>(i)] =
            std::byte{c.bool_contents(i) ? std::uint8_t{1} : std::uint8_t{0}};
      }
      bytes = std::move(out);
      break;
    }
    case DataType::kInt8:
      bytes = Narrowed<std::int8_t>(c.int_contents(), name);
      break;
    case DataType::kInt16:
      bytes = Narrowed<std::int16_t>(c.int_contents(), name);
      break;
    case DataType::kInt32:
      bytes = Copied(c.int_contents());
      break;
    case DataType::kInt64:
      bytes = Copied(c.int64_contents());
      break;
    case DataType::kUint8:
      bytes = Narrowed<std::uint8_t>(c.uint_contents(), name);
      break;
    case DataType::kUint16:
      bytes = Narrowed<std::uint16_t>(c.uint_contents(), name);
      break;
    case DataType::kUint32:
      bytes = Copied(c.uint_contents());
      break;
    case DataType::kUint64:
      bytes = Copied(c.uint64_contents());
      break;
    case DataType::kFp32:
      bytes = Copied(c.fp32_contents());
      break;
    case DataType::kFp64:
      bytes = Copied(c.fp64_contents());
      break;
    case DataType::kFp16:
      break;
    case DataType::kBytes: {
      std::vector<std::string> strings(c.bytes_contents().begin(), c.bytes_contents().end());
      return Tensor::FromStrings(std::move(text_name), std::move(shape), std::move(strings));
    }
  }
  if (!bytes.ok()) return bytes.status();
  return Tensor::FromBytes(std::move(text_name), type, std::move(shape), std::move(bytes).value());
}

// The tensor from its raw bytes.
Result<Tensor> FromRaw(const std::string& name, DataType type, std::vector<std::int64_t> shape,
                       std::int64_t count, std::string_view raw) {
  if (type != DataType::kBytes) {
    const std::size_t expected = static_cast<std::size_t>(count) * ElementSizeBytes(type);
    if (raw.size() != expected) {
      return InvalidArgument(fmt::format("input '{}': {} raw bytes for shape {} of {} ({} bytes)",
                                         name, raw.size(), ShapeToString(shape), DataTypeName(type),
                                         expected));
    }
    std::vector<std::byte> bytes(raw.size());
    if (!raw.empty()) std::memcpy(bytes.data(), raw.data(), raw.size());
    if (type == DataType::kBool) {
      for (const std::byte b : bytes) {
        if (b != std::byte{0} && b != std::byte{1}) {
          return InvalidArgument(fmt::format("input '{}': a BOOL byte is neither 0 nor 1", name));
        }
      }
    }
    return Tensor::FromBytes(name, type, std::move(shape), std::move(bytes));
  }
  std::vector<std::string> strings;
  strings.reserve(static_cast<std::size_t>(std::min<std::int64_t>(count, 1 << 16)));
  std::size_t at = 0;
  while (at < raw.size()) {
    if (static_cast<std::int64_t>(strings.size()) == count) break;
    if (raw.size() - at < 4) {
      return InvalidArgument(fmt::format("input '{}': a BYTES length is cut short", name));
    }
    std::uint32_t length = 0;
    std::memcpy(&length, raw.data() + at, 4);
    at += 4;
    if (length > raw.size() - at) {
      return InvalidArgument(fmt::format("input '{}': element {} is longer than the bytes left",
                                         name, strings.size()));
    }
    strings.emplace_back(raw.substr(at, length));
    at += length;
  }
  if (static_cast<std::int64_t>(strings.size()) != count || at != raw.size()) {
    return InvalidArgument(fmt::format(
        "input '{}': the raw bytes hold {} elements{} for shape {} ({} elements)", name,
        strings.size(), at != raw.size() ? " and more bytes" : "", ShapeToString(shape), count));
  }
  return Tensor::FromStrings(name, std::move(shape), std::move(strings));
}

}  // namespace

std::uint64_t WireBytes(const inference::ModelInferRequest& message) {
  return message.ByteSizeLong();
}

Result<InferRequest> FromGrpc(const inference::ModelInferRequest& message,
                              const ParseLimits& limits) {
  InferRequest request;
  if (!message.id().empty()) request.id = message.id();
  std::size_t parameter_values = 0;
  if (!message.parameters().empty()) {
    GSHARE_ASSIGN_OR_RETURN(request.parameters,
                            ParametersJson(message.parameters(), parameter_values, limits));
  }
  const int inputs = message.inputs_size();
  if (static_cast<std::size_t>(inputs) > limits.max_tensors ||
      static_cast<std::size_t>(message.outputs_size()) > limits.max_tensors) {
    return InvalidArgument(fmt::format("more than {} tensors", limits.max_tensors));
  }
  const bool raw = message.raw_input_contents_size() > 0;
  if (raw && message.raw_input_contents_size() != inputs) {
    return InvalidArgument(fmt::format("{} raw_input_contents for {} inputs",
                                       message.raw_input_contents_size(), inputs));
  }
  std::set<std::string_view> names;
  std::uint64_t elements = 0;
  std::uint64_t bytes = 0;
  for (int i = 0; i < inputs; ++i) {
    const auto& input = message.inputs(i);
    if (input.name().empty()) return InvalidArgument(fmt::format("input {} has no name", i));
    if (!names.insert(input.name()).second) {
      return InvalidArgument(fmt::format("input '{}' appears twice", input.name()));
    }
    auto type = ParseDataType(input.datatype());
    if (!type.ok()) {
      return InvalidArgument(fmt::format("input '{}': {}", input.name(), type.status().message()));
    }
    if (static_cast<std::size_t>(input.shape_size()) > Tensor::kMaxRank) {
      return InvalidArgument(fmt::format("input '{}': rank {} is above {}", input.name(),
                                         input.shape_size(), Tensor::kMaxRank));
    }
    std::vector<std::int64_t> shape(input.shape().begin(), input.shape().end());
    auto count = ElementCount(shape);
    if (!count.ok()) {
      return InvalidArgument(fmt::format("input '{}': {}", input.name(), count.status().message()));
    }
    elements += static_cast<std::uint64_t>(*count);
    if (elements > limits.max_elements) {
      return InvalidArgument(
          fmt::format("the inputs hold more than {} elements", limits.max_elements));
    }
    if (raw && input.has_contents() && ContentsCount(input.contents()) > 0) {
      return InvalidArgument(fmt::format(
          "input '{}' has contents while the request gives raw_input_contents", input.name()));
    }
    std::size_t parameters = 0;
    for (const auto& [key, value] : input.parameters()) {
      (void)key;
      (void)value;
      if (++parameters + parameter_values > limits.max_parameter_values) {
        return InvalidArgument(
            fmt::format("more than {} parameter values", limits.max_parameter_values));
      }
    }
    parameter_values += parameters;
    Result<Tensor> tensor =
        raw ? FromRaw(input.name(), *type, std::move(shape), *count, message.raw_input_contents(i))
            : FromContents(input, *type, std::move(shape), *count);
    if (!tensor.ok()) return tensor.status();
    bytes += tensor->data_bytes();
    if (bytes > limits.max_tensor_bytes) {
      return InvalidArgument(
          fmt::format("the inputs hold more than {} bytes", limits.max_tensor_bytes));
    }
    request.inputs.push_back(std::move(tensor).value());
  }
  std::set<std::string_view> outputs;
  for (const auto& output : message.outputs()) {
    if (output.name().empty()) return InvalidArgument("a requested output has no name");
    if (!outputs.insert(output.name()).second) {
      return InvalidArgument(fmt::format("output '{}' is requested twice", output.name()));
    }
    request.requested_outputs.push_back(output.name());
  }
  return request;
}

void ToGrpc(const InferResponse& response, inference::ModelInferResponse& message) {
  message.set_model_name(response.model_name);
  if (response.model_version) message.set_model_version(*response.model_version);
  if (response.id) message.set_id(*response.id);
  if (response.parameters) {
    for (const auto& [name, value] : response.parameters->items()) {
      inference::InferParameter& parameter = (*message.mutable_parameters())[name];
      if (value.is_boolean()) {
        parameter.set_bool_param(value.get<bool>());
      } else if (value.is_number_unsigned()) {
        parameter.set_uint64_param(value.get<std::uint64_t>());
      } else if (value.is_number_integer()) {
        parameter.set_int64_param(value.get<std::int64_t>());
      } else if (value.is_number_float()) {
        parameter.set_double_param(value.get<double>());
      } else if (value.is_string()) {
        parameter.set_string_param(value.get<std::string>());
      } else {
        parameter.set_string_param(value.dump());
      }
    }
  }
  for (const Tensor& tensor : response.outputs) {
    auto* output = message.add_outputs();
    output->set_name(tensor.name());
    output->set_datatype(std::string(DataTypeName(tensor.datatype())));
    for (const std::int64_t dim : tensor.shape()) output->add_shape(dim);
    std::string* raw = message.add_raw_output_contents();
    if (IsFixedSize(tensor.datatype())) {
      const auto data = tensor.raw_bytes();
      raw->assign(reinterpret_cast<const char*>(data.data()), data.size());
    } else {
      std::size_t total = 0;
      for (const std::string& s : tensor.strings()) total += 4 + s.size();
      raw->reserve(total);
      for (const std::string& s : tensor.strings()) {
        const auto length = static_cast<std::uint32_t>(s.size());
        raw->append(reinterpret_cast<const char*>(&length), 4);
        raw->append(s);
      }
    }
  }
}

}  // namespace gshare
