// InferRequest and InferResponse: the inference messages of the Open Inference Protocol (KServe
// v2), as the node sends them to function processes and the front receives them from clients.
//
// Plain values: they own their tensors and compare by value. `parameters` are kept as the JSON
// object the peer sent (absent stays absent), for the function to interpret.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gshare/tensor/tensor.h"

namespace gshare {

struct InferRequest {
  std::optional<std::string> id;
  std::optional<nlohmann::json> parameters;    // a JSON object when present
  std::vector<Tensor> inputs;                  // names unique
  std::vector<std::string> requested_outputs;  // empty: every output
  // The binary data extension: the requested outputs that gave a 'binary_data' parameter, with
  // its value (how the front writes the answer; a function process is never sent it).
  std::vector<std::pair<std::string, bool>> output_binary_data;

  friend bool operator==(const InferRequest&, const InferRequest&) = default;
};

struct InferResponse {
  std::string model_name;
  std::optional<std::string> model_version;
  std::optional<std::string> id;
  std::optional<nlohmann::json> parameters;  // a JSON object when present
  std::vector<Tensor> outputs;               // names unique

  friend bool operator==(const InferResponse&, const InferResponse&) = default;
};

}  // namespace gshare
