// gshare-function: the bundled example functions' program (runtimes "mlp", "cnn" and "echo").
//
//   gshare-function --model mlp|cnn|echo [--weights FILE] [--no-freeze]
//
// No FILE: the bundled weights, seed 1. --no-freeze leaves the weights writable: every checkpoint
// is then told the image was written, as the CUDA allocator shim tells it, and the node's chunk
// digests decide what to copy (to measure that path on emulated GPUs).
//
// Started by a gshare node, which sets GSHARE_CONTROL_FD, GSHARE_DEVICE_BASE and
// GSHARE_DEVICE_RESERVE (the function library, fn/runtime.h) and GSHARE_SOCKET (the Unix socket
// to serve on). It loads its model into its device memory, then serves the function protocol:
//   GET  /v2/health/live             200 while it runs
//   GET  /v2/health/ready            200 once the model is loaded
//   GET  /v2                         its extensions: the binary tensor data extension
//   GET  /v2/models/{name}           its metadata: the tensors it takes and gives (echo: none)
//   POST /v2/models/{name}/infer     KServe v2 JSON, or the binary tensor extension (answered in
//                                    it when binary_data_output asks); one input, stacked along its
//                                    first dimension
// Errors are {"error": "..."}: 400 for a bad request, 404 for another path, 507 when a batch does
// not fit the slice's quota (that batch fails; the function goes on), 500 otherwise.
#include <unistd.h>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "examples/models/forward.h"
#include "examples/runtime/model_function.h"
#include "gshare/common/heap_reuse.h"
#include "gshare/fn/runtime.h"
#include "gshare/net/unix_http.h"
#include "gshare/protocol/kserve_json.h"
#include "gshare/protocol/model_metadata.h"

namespace {

using gshare::Status;
using gshare::StatusCode;
using gshare::net::HttpRequest;
using gshare::net::HttpResponse;

HttpResponse Error(int status, std::string_view message) {
  return {status, gshare::ErrorJson(message), "application/json"};
}

int HttpStatusOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kResourceExhausted:
      return 507;
    default:
      return 500;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The node stops an instance with SIGTERM. As the init of its PID namespace the process gets
  // only the signals it handles: this one ends it at once (its state is the node's, in host
  // memory; nothing here needs saving).
  std::signal(SIGTERM, [](int) { std::_Exit(0); });
  gshare::KeepFreedMemoryForReuse();  // each request's body reuses the last one's pages
  std::string model;
  std::string weights;
  bool freeze = true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--no-freeze") {
      freeze = false;
    } else if (i + 1 < argc && flag == "--model") {
      model = argv[++i];
    } else if (i + 1 < argc && flag == "--weights") {
      weights = argv[++i];
    }
  }
  const char* socket_path = std::getenv("GSHARE_SOCKET");
  if (model.empty() || socket_path == nullptr) {
    std::fprintf(stderr,
                 "usage: gshare-function --model mlp|cnn|echo [--weights FILE] [--no-freeze], "
                 "started by a gshare node (GSHARE_SOCKET unset)\n");
    return 2;
  }
  gshare::examples::UseSingleBlasThread();
  auto runtime = gshare::fn::FunctionRuntime::ConnectFromEnvironment();
  if (!runtime.ok()) {
    std::fprintf(stderr, "gshare-function: %s\n", runtime.status().ToString().c_str());
    return 2;
  }
  auto function = gshare::examples::ModelFunction::Create(**runtime, model, weights, freeze);
  if (!function.ok()) {
    std::fprintf(stderr, "gshare-function: %s\n", function.status().ToString().c_str());
    // Weights that do not fit the model are the tenant's to fix; anything else is the node's.
    const bool rejected = function.status().code() == gshare::StatusCode::kInvalidArgument ||
                          function.status().code() == gshare::StatusCode::kNotFound;
    return rejected ? gshare::fn::kExitModelRejected : 2;
  }
  const std::string model_target = "/v2/models/" + model;
  const std::string infer_target = model_target + "/infer";
  const gshare::ModelTensors tensors = (*function)->tensors();
  // The node sends tensors in the binary tensor extension to a function that lists it.
  const std::string server_metadata =
      nlohmann::json{{"name", "gshare-function"}, {"extensions", {"binary_tensor_data"}}}.dump();
  const std::string metadata = nlohmann::json{{"name", model},
                                              {"versions", {"1"}},
                                              {"platform", "gshare-" + model},
                                              {"inputs", gshare::TensorSpecsJson(tensors.inputs)},
                                              {"outputs", gshare::TensorSpecsJson(tensors.outputs)}}
                                   .dump();
  auto handler = [&](const HttpRequest& request) -> HttpResponse {
    if (request.method == "GET" &&
        (request.target == "/v2/health/ready" || request.target == "/v2/health/live")) {
      return {200, "{}", "application/json"};
    }
    if (request.method == "GET" && request.target == "/v2") {
      return {200, server_metadata, "application/json"};
    }
    if (request.method == "GET" && request.target == model_target) {
      return {200, metadata, "application/json"};
    }
    if (request.method != "POST" || request.target != infer_target) {
      return Error(404, "no such endpoint: " + request.method + " " + request.target);
    }
    // JSON, or the binary tensor extension: the JSON's length in Inference-Header-Content-Length.
    const std::string_view json_length =
        gshare::net::FindHeader(request.headers, "Inference-Header-Content-Length");
    gshare::Result<gshare::InferRequest> parsed = gshare::InvalidArgument("unparsed");
    if (json_length.empty()) {
      parsed = gshare::ParseInferRequest(request.body);
    } else {
      std::size_t length = 0;
      const auto [end, error] =
          std::from_chars(json_length.data(), json_length.data() + json_length.size(), length);
      if (error != std::errc() || end != json_length.data() + json_length.size() ||
          length > request.body.size()) {
        return Error(400, "Inference-Header-Content-Length is not a length within the body");
      }
      parsed = gshare::ParseInferRequestWithBinary(std::string_view(request.body).substr(0, length),
                                                   std::string_view(request.body).substr(length));
    }
    if (!parsed.ok()) return Error(400, parsed.status().message());
    bool binary_out = false;
    if (parsed->parameters) {
      const auto it = parsed->parameters->find("binary_data_output");
      binary_out = it != parsed->parameters->end() && it->is_boolean() && it->get<bool>();
    }
    if (parsed->inputs.size() != 1) return Error(400, "the model takes exactly one input");
    auto output = (*function)->Infer(parsed->inputs.front());
    if (!output.ok()) {
      std::fprintf(stderr, "gshare-function: %s\n", output.status().ToString().c_str());
      return Error(HttpStatusOf(output.status()), output.status().message());
    }
    gshare::InferResponse response;
    response.model_name = model;
    response.model_version = "1";
    response.id = parsed->id;
    response.outputs.push_back(std::move(output).value());
    if (binary_out) {
      auto body = gshare::SerializeInferResponseWithBinary(response,
                                                           [](const std::string&) { return true; });
      if (!body.ok()) return Error(500, body.status().message());
      return {200,
              std::move(body->body),
              "application/octet-stream",
              {{"Inference-Header-Content-Length", std::to_string(body->json_bytes)}}};
    }
    auto body = gshare::SerializeInferResponse(response);
    if (!body.ok()) return Error(500, body.status().message());
    return {200, std::move(body).value(), "application/json"};
  };
  auto server = gshare::net::UnixHttpServer::Start(socket_path, handler);
  if (!server.ok()) {
    std::fprintf(stderr, "gshare-function: %s\n", server.status().ToString().c_str());
    return 2;
  }
  // Serves until the node ends this process (the runtime exits when the node is gone).
  for (;;) ::pause();
}
