#include "gshare/serve/front.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <utility>
#include "gshare/serve/http_util.h"

namespace gshare::serve {
namespace {

using net::HttpResponse;
using net::JsonErrorResponse;

nlohmann::json TensorsJson(const std::vector<TensorMetadata>& tensors) {
  nlohmann::json array = nlohmann::json::array();
  for (const TensorMetadata& tensor : tensors) {
    array.push_back(
        {{"name", tensor.name}, {"datatype", tensor.datatype}, {"shape", tensor.shape}});
  }
  return array;
}

}  // namespace

Front::Front(FrontOptions options, const Authenticator& authenticator, InferenceBackend& backend,
             const Clock& clock)
    : options_(std::move(options)),
      authenticator_(authenticator),
      backend_(backend),
      clock_(clock) {}

net::HttpServer::Handler Front::Handler() {
  return [this](net::ServerRequest request, net::Responder responder) {
    Handle(std::move(request), std::move(responder));
  };
}

void Front::Handle(net::ServerRequest request, net::Responder responder) {
  const auto path = PathSegments(request.target);
  if (!path || (*path)[0] != "v2") return responder.Respond(JsonErrorResponse(404, "not found"));
  const std::vector<std::string_view>& segments = *path;
  const bool get = request.method == "GET" || request.method == "HEAD";

  if (segments.size() == 3 && segments[1] == "health" &&
      (segments[2] == "live" || segments[2] == "ready")) {
    if (!get) return responder.Respond(MethodNotAllowed("GET, HEAD"));
    if (segments[2] == "live") return responder.Respond(JsonResponse(200, {{"live", true}}));
    if (!backend_.Ready()) {
      return responder.Respond(JsonErrorResponse(503, "the server is not ready"));
    }
    return responder.Respond(JsonResponse(200, {{"ready", true}}));
  }

  // /v2, or /v2/models/{name}[/versions/{version}][/ready|/infer].
  const bool server_metadata = segments.size() == 1;
  std::string_view name;
  std::optional<std::string_view> version;
  std::string_view action;
  if (!server_metadata) {
    if (segments.size() < 3 || segments[1] != "models") {
      return responder.Respond(JsonErrorResponse(404, "not found"));
    }
    name = segments[2];
    std::size_t next = 3;
    if (next < segments.size() && segments[next] == "versions") {
      if (next + 1 >= segments.size())
        return responder.Respond(JsonErrorResponse(404, "not found"));
      version = segments[next + 1];
      next += 2;
    }
    if (next + 1 == segments.size() && (segments[next] == "ready" || segments[next] == "infer")) {
      action = segments[next];
    } else if (next != segments.size()) {
      return responder.Respond(JsonErrorResponse(404, "not found"));
    }
  }
  if (action == "infer") {
    if (request.method != "POST") return responder.Respond(MethodNotAllowed("POST"));
  } else if (!get) {
    return responder.Respond(MethodNotAllowed("GET, HEAD"));
  }

  if (request.authorization.empty()) {
    return responder.Respond(
        Unauthorized("an API key is required: Authorization: Bearer <key>", "Bearer"));
  }
  const std::optional<std::string_view> key = BearerToken(request.authorization);
  std::optional<std::string> tenant;
  if (key) tenant = authenticator_.Authenticate(*key);
  if (!tenant) {
    return responder.Respond(
        Unauthorized("the API key is not valid", "Bearer error=\"invalid_token\""));
  }

  if (server_metadata) {
    return responder.Respond(
        JsonResponse(200, {{"name", options_.server_name},
                           {"version", options_.server_version.empty() ? std::string(GSHARE_VERSION)
                                                                       : options_.server_version},
                           {"extensions", nlohmann::json::array()}}));
  }
  HandleModel(request, std::move(responder), *tenant, name, version, action);
}

void Front::HandleModel(const net::ServerRequest& request, net::Responder responder,
                        const std::string& tenant, std::string_view name,
                        std::optional<std::string_view> version, std::string_view action) {
  // Checked before the model is looked up, so the answer is the same whether it exists or not.
  if (version && *version != kModelVersion) {
    return responder.Respond(JsonErrorResponse(
        404, "model '" + std::string(name) + "' has no version '" + std::string(*version) + "'"));
  }
  const std::optional<ModelInfo> model = backend_.FindModel(tenant, name);
  if (!model) return responder.Respond(ModelNotFound(name));

  if (action.empty()) {
    return responder.Respond(
        JsonResponse(200, {{"name", model->name},
                           {"versions", nlohmann::json::array({std::string(kModelVersion)})},
                           {"platform", model->platform},
                           {"inputs", TensorsJson(model->inputs)},
                           {"outputs", TensorsJson(model->outputs)}}));
  }
  if (!model->ready) {
    return responder.Respond(JsonErrorResponse(503, "model '" + model->name + "' is not ready"));
  }
  if (action == "ready") {
    return responder.Respond(JsonResponse(200, {{"name", model->name}, {"ready", true}}));
  }
  Infer(request, std::move(responder), tenant, *model);
}

void Front::Infer(const net::ServerRequest& request, net::Responder responder,
                  const std::string& tenant, const ModelInfo& model) {
  if (request.body.size() > options_.parse_limits.max_text_bytes) {
    return responder.Respond(JsonErrorResponse(413, "the inference request is too large"));
  }
  Result<InferRequest> parsed = ParseInferRequest(request.body, options_.parse_limits);
  if (!parsed.ok()) return responder.Respond(JsonErrorResponse(400, parsed.status().message()));

  const TimePoint deadline = clock_.Now() + model.slo;
  std::optional<std::string> id = parsed->id;
  const std::uint64_t ticket = backend_.Infer(
      tenant, model.name, std::move(parsed).value(), deadline,
      [responder, id = std::move(id), name = model.name](Result<InferResponse> result) {
        if (!result.ok()) {
          const Status& status = result.status();
          if (status.code() == StatusCode::kNotFound) return responder.Respond(ModelNotFound(name));
          return responder.Respond(
              JsonErrorResponse(HttpStatusFor(status.code()), status.message()));
        }
        InferResponse response = std::move(result).value();
        response.model_name = name;
        response.model_version = std::string(kModelVersion);
        response.id = id;
        Result<std::string> text = SerializeInferResponse(response);
        if (!text.ok()) {
          return responder.Respond(JsonErrorResponse(
              500, "the model's answer cannot be written as JSON: " + text.status().message()));
        }
        responder.Respond({200, std::move(text).value()});
      });
  if (ticket != 0) responder.OnCancel([this, ticket] { backend_.Cancel(ticket); });
}

}  // namespace gshare::serve
