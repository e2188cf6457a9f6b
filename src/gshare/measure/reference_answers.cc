#include "gshare/measure/reference_answers.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "gshare/protocol/kserve_json.h"
#include "gshare/tensor/half.h"

namespace gshare::measure {
namespace {

constexpr std::uintmax_t kMaxFileBytes = 256ull << 20;

Result<std::string> ReadSmallFile(const std::filesystem::path& path) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return IoError(fmt::format("{}: {}", path.string(), error.message()));
  if (size > kMaxFileBytes) {
    return InvalidArgument(fmt::format("{}: {} bytes, more than a reference may have ({})",
                                       path.string(), size, kMaxFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return IoError(fmt::format("{}: cannot read it", path.string()));
  return text.str();
}

// The values of a floating-point tensor as doubles; nothing for another datatype.
std::optional<std::vector<double>> FloatValues(const Tensor& tensor) {
  std::vector<double> values;
  switch (tensor.datatype()) {
    case DataType::kFp32: {
      auto span = tensor.Values<float>();
      if (!span.ok()) return std::nullopt;
      values.assign(span->begin(), span->end());
      return values;
    }
    case DataType::kFp16: {
      auto span = tensor.Values<Half>();
      if (!span.ok()) return std::nullopt;
      for (const Half h : *span) values.push_back(HalfToDouble(h));
      return values;
    }
    case DataType::kFp64: {
      auto span = tensor.Values<double>();
      if (!span.ok()) return std::nullopt;
      values.assign(span->begin(), span->end());
      return values;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

Result<ReferenceAnswers> ReferenceAnswers::Load(const std::filesystem::path& dir,
                                                const std::vector<std::string>& functions,
                                                double relative_tolerance) {
  if (!std::isfinite(relative_tolerance) || relative_tolerance < 0 || relative_tolerance > 1) {
    return InvalidArgument(
        fmt::format("the relative tolerance {} is not within 0 to 1", relative_tolerance));
  }
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return InvalidArgument(fmt::format("--references {}: not a folder", dir.string()));
  }
  ReferenceAnswers references;
  references.relative_tolerance_ = relative_tolerance;
  // The references are ours, as large as a model's input may be.
  ParseLimits limits;
  limits.max_text_bytes = kMaxFileBytes;
  for (const std::string& function : functions) {
    const auto request_path = dir / (function + ".request.json");
    const auto response_path = dir / (function + ".response.json");
    const bool has_request = std::filesystem::exists(request_path, error);
    const bool has_response = std::filesystem::exists(response_path, error);
    if (!has_request && !has_response) continue;
    if (has_request != has_response) {
      return InvalidArgument(fmt::format("function '{}': {} without {}", function,
                                         (has_request ? request_path : response_path).string(),
                                         (has_request ? response_path : request_path).string()));
    }
    GSHARE_ASSIGN_OR_RETURN(const std::string request_text, ReadSmallFile(request_path));
    GSHARE_ASSIGN_OR_RETURN(const std::string response_text, ReadSmallFile(response_path));
    auto request = ParseInferRequest(request_text, limits);
    if (!request.ok()) return request.status().WithContext(request_path.string());
    auto response = ParseInferResponse(response_text, limits);
    if (!response.ok()) return response.status().WithContext(response_path.string());
    if (response->outputs.empty()) {
      return InvalidArgument(fmt::format("{}: no outputs", response_path.string()));
    }
    references.answers_[function] = {std::move(request).value(),
                                     std::move(response).value().outputs};
  }
  return references;
}

const ReferenceAnswer* ReferenceAnswers::Find(const std::string& function) const {
  auto it = answers_.find(function);
  return it == answers_.end() ? nullptr : &it->second;
}

std::string ReferenceAnswers::Check(const ReferenceAnswer& reference,
                                    const std::vector<Tensor>& outputs) const {
  for (const Tensor& expected : reference.outputs) {
    auto got = std::find_if(outputs.begin(), outputs.end(),
                            [&](const Tensor& t) { return t.name() == expected.name(); });
    if (got == outputs.end()) return fmt::format("no output '{}'", expected.name());
    if (got->datatype() != expected.datatype() || got->shape() != expected.shape()) {
      return fmt::format("output '{}' is {} [{}], not {} [{}]", expected.name(),
                         DataTypeName(got->datatype()), fmt::join(got->shape(), ","),
                         DataTypeName(expected.datatype()), fmt::join(expected.shape(), ","));
    }
    const auto want = FloatValues(expected);
    if (!want) {
      if (!(*got == expected)) return fmt::format("output '{}' differs", expected.name());
      continue;
    }
    const auto have = FloatValues(*got);
    if (!have || have->size() != want->size()) {
      return fmt::format("output '{}' cannot be read", expected.name());
    }
    double scale = 0;
    for (const double value : *want) scale = std::max(scale, std::abs(value));
    double worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < want->size(); ++i) {
      const double difference = std::abs((*have)[i] - (*want)[i]);
      if (!(difference <= worst)) {  // NaN is worst
        worst = std::isnan(difference) ? INFINITY : difference;
        at = i;
      }
    }
    if (worst > relative_tolerance_ * scale) {
      return fmt::format(
          "output '{}' element {} is {:.7g}, the reference {:.7g}: a difference of {:.3g} of the "
          "reference's largest magnitude (at most {:.3g})",
          expected.name(), at, (*have)[at], (*want)[at], scale > 0 ? worst / scale : worst,
          relative_tolerance_);
    }
  }
  return "";
}

}  // namespace gshare::measure
