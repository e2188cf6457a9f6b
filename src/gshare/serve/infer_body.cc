#include "gshare/serve/infer_body.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "gshare/tensor/data_type.h"

namespace gshare::serve {
namespace {

using net::HttpResponse;
using net::JsonErrorResponse;

// Whether `text` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool ValidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    std::uint32_t point = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      length = 2;
      point = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      length = 3;
      point = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      length = 4;
      point = c & 0x07;
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      point = (point << 6) | (next & 0x3f);
    }
    constexpr std::uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
    if (point < kLeast[length] || point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff)) {
      return false;
    }
    i += length;
  }
  return true;
}

// The raw form: the whole body is the model's one input.
Result<InferRequest> ParseRawBody(std::string_view body, const ModelInfo& model,
                                  const ParseLimits& limits) {
  if (model.inputs.size() != 1) {
    return InvalidArgument(fmt::format(
        "a body without its JSON (Inference-Header-Content-Length: 0) is the data of the model's "
        "one input, but model '{}' {}; send the JSON header before the data",
        model.name,
        model.inputs.empty() ? "does not describe its inputs"
                             : fmt::format("has {} inputs", model.inputs.size())));
  }
  const TensorSpec& input = model.inputs.front();
  const DataType type = input.datatype;
  std::vector<std::int64_t> shape = input.shape;
  const auto free_count = [&shape] {
    return std::count_if(shape.begin(), shape.end(), [](std::int64_t dim) { return dim < 0; });
  };
  // A leading -1 is the batch: a raw body is one request of it when another dimension is free.
  if (!shape.empty() && shape.front() < 0 && free_count() > 1) shape.front() = 1;
  std::uint64_t elements = 0;
  if (IsFixedSize(type)) {
    const std::size_t size = ElementSizeBytes(type);
    if (body.size() % size != 0) {
      return InvalidArgument(fmt::format("input '{}': a body of {} bytes is no whole number of {}",
                                         input.name, body.size(), DataTypeName(type)));
    }
    elements = body.size() / size;
  } else {
    // BYTES: the whole body is the one element.
    if (body.size() > limits.max_tensor_bytes) {
      return InvalidArgument(fmt::format("input '{}': {} bytes exceed the limit on tensor bytes",
                                         input.name, body.size()));
    }
    for (std::int64_t& dim : shape) {
      if (dim < 0) dim = 1;
    }
    auto tensor = Tensor::FromStrings(input.name, shape, {std::string(body)});
    if (!tensor.ok()) {
      return InvalidArgument(fmt::format(
          "input '{}': a body without its JSON is one BYTES element, which shape {} does not "
          "hold",
          input.name, ShapeToString(input.shape)));
    }
    InferRequest request;
    request.inputs.push_back(std::move(tensor).value());
    return request;
  }
  std::uint64_t known = 1;
  const auto free_dims = free_count();
  for (const std::int64_t dim : shape) {
    if (dim >= 0) known *= static_cast<std::uint64_t>(dim);
  }
  if (free_dims > 1) {
    return InvalidArgument(fmt::format(
        "input '{}': its shape {} has more than one free dimension, which a body without its JSON "
        "cannot fix; send the JSON header",
        input.name, ShapeToString(input.shape)));
  }
  if (free_dims == 1) {
    if (known == 0 || elements % known != 0) {
      return InvalidArgument(fmt::format("input '{}': {} elements do not fit its shape {}",
                                         input.name, elements, ShapeToString(input.shape)));
    }
    for (std::int64_t& dim : shape) {
      if (dim < 0) dim = static_cast<std::int64_t>(elements / known);
    }
  } else if (known != elements) {
    return InvalidArgument(fmt::format("input '{}': {} elements do not fit its shape {}",
                                       input.name, elements, ShapeToString(input.shape)));
  }
  const nlohmann::json header = {
      {"inputs", nlohmann::json::array({{{"name", input.name},
                                         {"datatype", std::string(DataTypeName(type))},
                                         {"shape", shape},
                                         {"parameters", {{"binary_data_size", body.size()}}}}})}};
  return ParseInferRequestWithBinary(header.dump(), body, limits);
}

}  // namespace

Status CheckStringsCarryAsJson(const InferRequest& request) {
  for (const Tensor& input : request.inputs) {
    const std::vector<std::string>& strings = input.strings();
    for (std::size_t i = 0; i < strings.size(); ++i) {
      if (!ValidUtf8(strings[i])) {
        return InvalidArgument(fmt::format(
            "input '{}': element {} is not valid UTF-8, which this function cannot be sent (it "
            "takes tensors as JSON text only)",
            input.name(), i));
      }
    }
  }
  return Status::Ok();
}

Result<std::optional<std::size_t>> JsonLengthOf(const net::ServerRequest& request) {
  const std::string_view value = request.Header(kHeaderLengthField);
  if (value.empty()) return std::optional<std::size_t>();
  if (value.size() > 19 ||
      !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return InvalidArgument(
        fmt::format("{} is not a byte count: '{}'", kHeaderLengthField, value.substr(0, 32)));
  }
  std::uint64_t length = 0;
  for (const char c : value) length = length * 10 + static_cast<std::uint64_t>(c - '0');
  if (length > request.body.size()) {
    return InvalidArgument(fmt::format("{} is {}, but the body has only {} bytes",
                                       kHeaderLengthField, length, request.body.size()));
  }
  return std::optional<std::size_t>(static_cast<std::size_t>(length));
}

Result<InferRequest> ParseInferBody(std::string_view body, std::optional<std::size_t> json_bytes,
                                    const ModelInfo& model, const ParseLimits& limits) {
  if (!json_bytes) return ParseInferRequest(body, limits);  // JSON text: UTF-8 already
  if (*json_bytes > body.size()) {
    return InvalidArgument(fmt::format("{} is {}, but the body has only {} bytes",
                                       kHeaderLengthField, *json_bytes, body.size()));
  }
  Result<InferRequest> request =
      *json_bytes == 0 ? ParseRawBody(body, model, limits)
                       : ParseInferRequestWithBinary(body.substr(0, *json_bytes),
                                                     body.substr(*json_bytes), limits);
  return request;
}

Result<AnswerFormat> AnswerFormatOf(const InferRequest& request) {
  AnswerFormat format;
  if (request.parameters) {
    if (const auto it = request.parameters->find("binary_data_output");
        it != request.parameters->end()) {
      if (!it->is_boolean()) {
        return InvalidArgument("parameter 'binary_data_output' is not a boolean");
      }
      format.binary_by_default = it->get<bool>();
    }
  }
  format.per_output = request.output_binary_data;
  format.requested = request.requested_outputs;
  return format;
}

Status CheckAgainstModel(const InferRequest& request, const ModelInfo& model) {
  if (Status fits = CheckInputsFit(request.inputs, model.inputs); !fits.ok()) {
    return InvalidArgument(fmt::format("model '{}': {}", model.name, fits.message()));
  }
  if (model.outputs.empty()) return Status::Ok();
  for (const std::string& name : request.requested_outputs) {
    const bool known = std::any_of(model.outputs.begin(), model.outputs.end(),
                                   [&](const TensorSpec& output) { return output.name == name; });
    if (!known) {
      return InvalidArgument(fmt::format("model '{}' has no output '{}'", model.name, name));
    }
  }
  return Status::Ok();
}

HttpResponse WriteAnswerBody(InferResponse response, const AnswerFormat& format) {
  if (!format.requested.empty()) {
    std::vector<Tensor> picked;
    picked.reserve(format.requested.size());
    for (const std::string& name : format.requested) {
      auto it = std::find_if(response.outputs.begin(), response.outputs.end(),
                             [&](const Tensor& output) { return output.name() == name; });
      if (it == response.outputs.end() && format.described_outputs) {
        return JsonErrorResponse(500, fmt::format("model '{}' answered without its output '{}'",
                                                  response.model_name, name));
      }
      if (it == response.outputs.end()) {
        return JsonErrorResponse(
            400, fmt::format("model '{}' has no output '{}'", response.model_name, name));
      }
      picked.push_back(std::move(*it));
    }
    response.outputs = std::move(picked);
  }
  const auto binary = [&format](const std::string& name) {
    for (const auto& [output, value] : format.per_output) {
      if (output == name) return value;
    }
    return format.binary_by_default;
  };
  const bool any_binary = std::any_of(response.outputs.begin(), response.outputs.end(),
                                      [&](const Tensor& output) { return binary(output.name()); });
  if (!any_binary) {
    Result<std::string> text = SerializeInferResponse(response);
    if (!text.ok()) {
      return JsonErrorResponse(
          500, "the model's answer cannot be written as JSON: " + text.status().message());
    }
    return {200, std::move(text).value()};
  }
  Result<BinaryBody> body = SerializeInferResponseWithBinary(response, binary);
  if (!body.ok()) {
    return JsonErrorResponse(500,
                             "the model's answer cannot be written: " + body.status().message());
  }
  HttpResponse out{200, std::move(body->body), std::string(kBinaryContentType)};
  out.headers.emplace_back(std::string(kHeaderLengthField), std::to_string(body->json_bytes));
  return out;
}

}  // namespace gshare::serve
