#include "gshare/serve/front.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <utility>
#include "gshare/protocol/model_metadata.h"
#include "gshare/serve/http_util.h"
#include "gshare/serve/infer_body.h"

namespace gshare::serve {
namespace {

using net::HttpResponse;
using net::JsonErrorResponse;

// Triton's model configuration, of what a function has: `data_type` as Triton names types
// (TYPE_FP32), `dims` without the batch dimension when the model batches.
nlohmann::json ConfigTensorsJson(const std::vector<TensorSpec>& tensors, bool batched) {
  nlohmann::json array = nlohmann::json::array();
  for (const TensorSpec& tensor : tensors) {
    std::vector<std::int64_t> dims = tensor.shape;
    if (batched && !dims.empty()) dims.erase(dims.begin());
    const std::string_view name = DataTypeName(tensor.datatype);
    const std::string type = tensor.datatype == DataType::kBytes ? "STRING" : std::string(name);
    array.push_back({{"name", tensor.name}, {"data_type", "TYPE_" + type}, {"dims", dims}});
  }
  return array;
}

nlohmann::json ModelConfigJson(const ModelInfo& model) {
  const int max_batch = model.max_batch > 1 ? model.max_batch : 0;
  return {{"name", model.name},
          {"platform", model.platform},
          {"backend", model.platform},
          {"max_batch_size", max_batch},
          {"input", ConfigTensorsJson(model.inputs, max_batch > 0)},
          {"output", ConfigTensorsJson(model.outputs, max_batch > 0)}};
}

// Triton's statistics extension, of what the backend counts: compute_input is the encoding of a
// request's inputs for its function, compute_output the decoding of its answer where it was
// decoded alone (a batch's answer is split on the node and not timed per request).
nlohmann::json StatisticsJson(const std::vector<ModelStatistics>& models) {
  nlohmann::json list = nlohmann::json::array();
  const auto pair = [](std::uint64_t count, std::uint64_t ns) {
    return nlohmann::json{{"count", count}, {"ns", ns}};
  };
  for (const ModelStatistics& model : models) {
    list.push_back({{"name", model.name},
                    {"version", std::string(kModelVersion)},
                    {"inference_count", model.success_count},
                    {"inference_stats",
                     {{"success", pair(model.success_count, model.success_ns)},
                      {"fail", pair(model.fail_count, model.fail_ns)},
                      {"queue", pair(model.queue_count, model.queue_ns)},
                      {"compute_input", pair(model.input_count, model.input_ns)},
                      {"compute_infer", pair(model.infer_count, model.infer_ns)},
                      {"compute_output", pair(model.output_count, model.output_ns)}}}});
  }
  return {{"model_stats", std::move(list)}};
}

// The answer, decoded where the backend left it encoded, or the message of the 500 that one that
// does not decode gets.
Result<InferResponse> TakeAnswer(InferAnswer answer) {
  Result<InferResponse> response = std::move(answer).Take();
  if (!response.ok()) {
    return Internal(
        fmt::format("the function's answer is malformed: {}", response.status().message()));
  }
  return response;
}

// `answer` written in `format`, or its 500.
void WriteAnswer(InferAnswer answer, const AnswerFormat& format, const net::Responder& responder) {
  Result<InferResponse> response = TakeAnswer(std::move(answer));
  if (!response.ok()) return responder.Respond(JsonErrorResponse(500, response.status().message()));
  responder.Respond(WriteAnswerBody(std::move(response).value(), format));
}

}  // namespace

Front::Front(FrontOptions options, const Authenticator& authenticator, InferenceBackend& backend,
             const Clock& clock, ParsePool* parse_pool)
    : options_(std::move(options)),
      authenticator_(authenticator),
      backend_(backend),
      clock_(clock),
      parse_pool_(parse_pool),
      in_flight_share_(options_.max_in_flight),
      body_share_(options_.max_buffered_bytes) {}

net::HttpServer::Handler Front::Handler() {
  return [this](net::ServerRequest request, net::Responder responder) {
    Handle(std::move(request), std::move(responder));
  };
}

Front::Admission Front::Admit(const net::ServerRequest& request) const {
  Admission admission;
  const auto refuse = [&](HttpResponse response) {
    admission.refusal = std::move(response);
    return admission;
  };
  const auto path = PathSegments(request.target);
  if (!path || (*path)[0] != "v2") return refuse(JsonErrorResponse(404, "not found"));
  const std::vector<std::string_view>& segments = *path;
  const bool get = request.method == "GET" || request.method == "HEAD";

  if (segments.size() == 3 && segments[1] == "health" &&
      (segments[2] == "live" || segments[2] == "ready")) {
    if (!get) return refuse(MethodNotAllowed("GET, HEAD"));
    admission.kind =
        segments[2] == "live" ? Admission::Kind::kHealthLive : Admission::Kind::kHealthReady;
    return admission;
  }

  // /v2, or /v2/models/{name}[/versions/{version}][/ready|/infer].
  const bool server_metadata = segments.size() == 1;
  if (!server_metadata) {
    if (segments.size() < 3 || segments[1] != "models") {
      return refuse(JsonErrorResponse(404, "not found"));
    }
    admission.name = segments[2];
    std::size_t next = 3;
    if (segments.size() == 3 && segments[2] == "stats") {  // every model's statistics
      admission.name = {};
      admission.action = "stats";
    }
    if (next < segments.size() && segments[next] == "versions") {
      if (next + 1 >= segments.size()) return refuse(JsonErrorResponse(404, "not found"));
      admission.version = segments[next + 1];
      next += 2;
    }
    if (next + 1 == segments.size() && (segments[next] == "ready" || segments[next] == "infer" ||
                                        segments[next] == "config" || segments[next] == "stats")) {
      admission.action = segments[next];
    } else if (next != segments.size()) {
      return refuse(JsonErrorResponse(404, "not found"));
    }
  }
  if (admission.action == "infer") {
    if (request.method != "POST") return refuse(MethodNotAllowed("POST"));
  } else if (!get) {
    return refuse(MethodNotAllowed("GET, HEAD"));
  }

  if (request.authorization.empty()) {
    return refuse(Unauthorized("an API key is required: Authorization: Bearer <key>", "Bearer"));
  }
  const std::optional<std::string_view> key = BearerToken(request.authorization);
  std::optional<std::string> tenant;
  if (key) tenant = authenticator_.Authenticate(*key);
  if (!tenant) {
    return refuse(Unauthorized("the API key is not valid", "Bearer error=\"invalid_token\""));
  }
  admission.tenant = *std::move(tenant);
  // The declared size (the whole body once read), before the model is looked up: the same answer
  // whether the model exists or not.
  const std::uint64_t body_bytes =
      request.body.empty() ? request.declared_length.value_or(0) : request.body.size();
  if (admission.action == "infer" && body_bytes > options_.parse_limits.max_text_bytes) {
    return refuse(
        JsonErrorResponse(413, fmt::format("the inference request is {} bytes; the limit is {}",
                                           body_bytes, options_.parse_limits.max_text_bytes)));
  }
  admission.kind = server_metadata ? Admission::Kind::kServerMetadata : Admission::Kind::kModel;
  return admission;
}

namespace {

// An inference request's places in the two shares, given back together.
struct RequestShares {
  FairShare::Hold in_flight;
  FairShare::Hold body;
};

}  // namespace

Result<std::shared_ptr<void>> Front::TakeShares(const std::string& tenant,
                                                std::uint64_t body_bytes) {
  std::optional<FairShare::Hold> place = in_flight_share_.Take(tenant, 1);
  if (!place) {
    return ResourceExhausted(
        fmt::format("tenant '{}' has {} inference requests in flight, its share of the server's "
                    "{} while other tenants use theirs; try again later",
                    tenant, in_flight_share_.held_by(tenant), in_flight_share_.capacity()));
  }
  std::optional<FairShare::Hold> bytes = body_share_.Take(tenant, body_bytes);
  if (!bytes) {
    return ResourceExhausted(fmt::format(
        "tenant '{}' has {} bytes of inference bodies held, its share of the server's {} while "
        "other tenants use theirs; try again later",
        tenant, body_share_.held_by(tenant), body_share_.capacity()));
  }
  auto shares = std::make_shared<RequestShares>();
  shares->in_flight = std::move(*place);
  shares->body = std::move(*bytes);
  return std::shared_ptr<void>(std::move(shares));
}

std::optional<HttpResponse> Front::CheckHead(net::ServerRequest& head) {
  Admission admission = Admit(head);
  if (admission.refusal && admission.action == "infer") {
    InferenceAnswered("http", admission.refusal->status);
  }
  if (admission.refusal || admission.action != "infer") return std::move(admission.refusal);
  // A chunked body's length is known only once read: it takes the largest a body may be.
  auto shares = TakeShares(
      admission.tenant,
      head.declared_length
          ? *head.declared_length
          : std::min<std::uint64_t>(options_.parse_limits.max_text_bytes, body_share_.capacity()));
  if (!shares.ok()) {
    InferenceAnswered("http", 429);
    return JsonErrorResponse(429, shares.status().message());
  }
  head.hold = std::move(shares).value();
  return std::nullopt;
}

void Front::Handle(net::ServerRequest request, net::Responder responder) {
  Admission admission = Admit(request);
  if (admission.action == "infer" && options_.on_inference_answer) {
    responder.OnAnswer([this](int status) { InferenceAnswered("http", status); });
  }
  if (admission.refusal) return responder.Respond(std::move(*admission.refusal));
  switch (admission.kind) {
    case Admission::Kind::kHealthLive:
      return responder.Respond(JsonResponse(200, {{"live", true}}));
    case Admission::Kind::kHealthReady:
      if (!backend_.Ready()) {
        return responder.Respond(JsonErrorResponse(503, "the server is not ready"));
      }
      return responder.Respond(JsonResponse(200, {{"ready", true}}));
    case Admission::Kind::kServerMetadata:
      return responder.Respond(JsonResponse(
          200, {{"name", options_.server_name},
                {"version", options_.server_version.empty() ? std::string(GSHARE_VERSION)
                                                            : options_.server_version},
                {"extensions", nlohmann::json::array({std::string(kBinaryExtension)})}}));
    case Admission::Kind::kModel:
      break;
  }
  std::shared_ptr<void> shares = std::move(request.hold);
  if (admission.action == "infer" && !shares) {  // no header check took them
    auto taken = TakeShares(admission.tenant, request.body.size());
    if (!taken.ok()) return responder.Respond(JsonErrorResponse(429, taken.status().message()));
    shares = std::move(taken).value();
  }
  std::optional<std::size_t> json_bytes;
  if (admission.action == "infer") {
    Result<std::optional<std::size_t>> length = JsonLengthOf(request);
    if (!length.ok()) return responder.Respond(JsonErrorResponse(400, length.status().message()));
    json_bytes = *length;
  }
  HandleModel(std::move(request.body), json_bytes, std::move(responder), admission.tenant,
              admission.name, admission.version, admission.action, std::move(shares));
}

void Front::HandleModel(std::string body, std::optional<std::size_t> json_bytes,
                        net::Responder responder, const std::string& tenant, std::string_view name,
                        std::optional<std::string_view> version, std::string_view action,
                        std::shared_ptr<void> shares) {
  // Checked before the model is looked up, so the answer is the same whether it exists or not.
  if (version && *version != kModelVersion) {
    return responder.Respond(JsonErrorResponse(
        404, "model '" + std::string(name) + "' has no version '" + std::string(*version) + "'"));
  }
  if (action == "stats" && name.empty()) {
    return responder.Respond(
        JsonResponse(200, StatisticsJson(backend_.Statistics(tenant, std::nullopt))));
  }
  const std::optional<ModelInfo> model = backend_.FindModel(tenant, name);
  if (!model) return responder.Respond(ModelNotFound(name));
  if (action == "stats") {
    std::vector<ModelStatistics> statistics = backend_.Statistics(tenant, name);
    if (statistics.empty()) return responder.Respond(ModelNotFound(name));  // gone meanwhile
    return responder.Respond(JsonResponse(200, StatisticsJson(statistics)));
  }

  if (action.empty()) {
    return responder.Respond(
        JsonResponse(200, {{"name", model->name},
                           {"versions", nlohmann::json::array({std::string(kModelVersion)})},
                           {"platform", model->platform},
                           {"inputs", TensorSpecsJson(model->inputs)},
                           {"outputs", TensorSpecsJson(model->outputs)}}));
  }
  if (!model->ready) {
    return responder.Respond(JsonErrorResponse(503, "model '" + model->name + "' is not ready"));
  }
  if (action == "ready") {
    return responder.Respond(JsonResponse(200, {{"name", model->name}, {"ready", true}}));
  }
  if (action == "config") return responder.Respond(JsonResponse(200, ModelConfigJson(*model)));
  Infer(std::move(body), json_bytes, std::move(responder), tenant, *model, std::move(shares));
}

void Front::Infer(std::string body, std::optional<std::size_t> json_bytes, net::Responder responder,
                  const std::string& tenant, const ModelInfo& model, std::shared_ptr<void> shares) {
  const TimePoint deadline = clock_.Now() + model.slo;  // from its arrival, parse time included
  if (parse_pool_ == nullptr || body.size() <= kInlineParseBytes) {
    return ParseAndRun(body, json_bytes, std::move(responder), tenant, model, deadline,
                       std::move(shares));
  }
  auto shared_body = std::make_shared<const std::string>(std::move(body));
  const Status queued =
      parse_pool_->Submit(tenant, [this, shared_body, json_bytes, responder, tenant, model,
                                   deadline, shares = std::move(shares)](const Status& go) mutable {
        if (!go.ok()) return responder.Respond(JsonErrorResponse(503, go.message()));
        if (responder.Cancelled()) return;  // the client went away while it waited
        ParseAndRun(*shared_body, json_bytes, responder, tenant, model, deadline,
                    std::move(shares));
      });
  if (!queued.ok()) {
    responder.Respond(JsonErrorResponse(HttpStatusFor(queued.code()), queued.message()));
  }
}

void Front::ParseAndRun(std::string_view body, std::optional<std::size_t> json_bytes,
                        net::Responder responder, const std::string& tenant, const ModelInfo& model,
                        TimePoint deadline, std::shared_ptr<void> shares) {
  Result<InferRequest> parsed = ParseInferBody(body, json_bytes, model, options_.parse_limits);
  if (!parsed.ok()) return responder.Respond(JsonErrorResponse(400, parsed.status().message()));
  Result<AnswerFormat> format = AnswerFormatOf(*parsed);
  if (!format.ok()) return responder.Respond(JsonErrorResponse(400, format.status().message()));
  if (json_bytes == std::size_t{0}) format->binary_by_default = true;  // the raw form's answer
  format->described_outputs = !model.outputs.empty();
  const std::uint64_t ticket =
      Run(std::move(parsed).value(), tenant, model, deadline,
          [this, responder, tenant, format = std::move(format).value(), shares = std::move(shares)](
              Result<InferAnswer> result, net::HttpResponse error) mutable {
            if (!result.ok()) return responder.Respond(std::move(error));
            // This is the backend's thread (the node's loop, which every tenant's requests share):
            // the answer is decoded and written on the connection's io thread, a large one on the
            // parse pool in its tenant's turn. Answers are not refused for the tenant's queue:
            // their number is bounded by its share of the requests in flight. The shares are held
            // until the answer is written.
            const std::uint64_t bytes = result->bytes();
            auto write = [answer = std::move(result).value(), format, responder,
                          shares = std::move(shares)]() mutable {
              WriteAnswer(std::move(answer), format, responder);
              shares.reset();
            };
            auto job = std::make_shared<decltype(write)>(std::move(write));
            if (parse_pool_ != nullptr && bytes > kInlineParseBytes) {
              const Status queued = parse_pool_->Submit(
                  tenant,
                  [job, responder](const Status& go) {
                    if (!go.ok()) return responder.Respond(JsonErrorResponse(503, go.message()));
                    if (responder.Cancelled()) return;  // the client went away while it waited
                    (*job)();
                  },
                  /*bounded=*/false);
              if (queued.ok())
                return;  // else the pool has stopped (shutdown): the io thread writes it
            }
            responder.Run([job] { (*job)(); });
          });
  if (ticket != 0) responder.OnCancel([this, ticket] { backend_.Cancel(ticket); });
}

std::uint64_t Front::Run(InferRequest request, const std::string& tenant, const ModelInfo& model,
                         TimePoint deadline,
                         std::function<void(Result<InferAnswer>, net::HttpResponse)> done) {
  if (Status fits = CheckAgainstModel(request, model); !fits.ok()) {
    done(fits, JsonErrorResponse(400, fits.message()));
    return 0;
  }
  if (!model.binary_tensors) {
    if (Status carried = CheckStringsCarryAsJson(request); !carried.ok()) {
      done(carried, JsonErrorResponse(400, carried.message()));
      return 0;
    }
  }
  // The answer's format is the front's (the function answers JSON): nothing of it goes on, so
  // that requests batched together have the same parameters.
  request.output_binary_data.clear();
  if (request.parameters) {
    request.parameters->erase("binary_data_output");
    if (request.parameters->empty()) request.parameters.reset();
  }
  std::optional<std::string> id = request.id;
  return backend_.Infer(
      tenant, model.name, std::move(request), deadline,
      [id = std::move(id), name = model.name,
       done = std::move(done)](Result<InferAnswer> result) mutable {
        if (!result.ok()) {
          const Status& status = result.status();
          if (status.code() == StatusCode::kNotFound) return done(status, ModelNotFound(name));
          // Withdrawn because its client went away: nobody reads it; 499 (as nginx logs it).
          if (status.code() == StatusCode::kCancelled) {
            return done(status, JsonErrorResponse(499, status.message()));
          }
          return done(status, JsonErrorResponse(HttpStatusFor(status.code()), status.message()));
        }
        result->Then([id = std::move(id), name = std::move(name)](InferResponse& response) {
          response.model_name = name;
          response.model_version = std::string(kModelVersion);
          response.id = id;
        });
        done(std::move(result), {});
      });
}

std::function<void()> Front::InferParsed(std::string_view authorization, std::string_view name,
                                         std::optional<std::string_view> version,
                                         std::uint64_t wire_bytes,
                                         const std::function<Result<InferRequest>()>& parse,
                                         std::function<void(ParsedOutcome)> done) {
  if (options_.on_inference_answer) {
    done = [this, done = std::move(done)](ParsedOutcome outcome) {
      InferenceAnswered("grpc", outcome.status);
      done(std::move(outcome));
    };
  }
  const auto refuse = [&done](const net::HttpResponse& response) {
    done({response.status, ErrorMessageOf(response), std::nullopt});
    return std::function<void()>([] {});
  };
  // The checks HTTP makes of the request line and the header, on the same route.
  net::ServerRequest head;
  head.method = "POST";
  head.target = "/v2/models/" + std::string(name);
  if (version) head.target += "/versions/" + std::string(*version);
  head.target += "/infer";
  head.authorization = std::string(authorization);
  head.declared_length = wire_bytes;
  if (name.empty() || !PathSegments(head.target)) {
    return refuse(JsonErrorResponse(404, "not found"));
  }
  Admission admission = Admit(head);
  if (admission.refusal) return refuse(*admission.refusal);
  auto shares = TakeShares(admission.tenant, wire_bytes);
  if (!shares.ok()) return refuse(JsonErrorResponse(429, shares.status().message()));
  if (version && *version != kModelVersion) {
    return refuse(JsonErrorResponse(
        404, "model '" + std::string(name) + "' has no version '" + std::string(*version) + "'"));
  }
  const std::optional<ModelInfo> model = backend_.FindModel(admission.tenant, name);
  if (!model) return refuse(ModelNotFound(name));
  if (!model->ready) {
    return refuse(JsonErrorResponse(503, "model '" + model->name + "' is not ready"));
  }
  // Stamped before the parse, as an HTTP request's is at its arrival.
  const TimePoint deadline = clock_.Now() + model->slo;
  Result<InferRequest> request = parse();
  if (!request.ok()) return refuse(JsonErrorResponse(400, request.status().message()));
  const std::uint64_t ticket = Run(
      std::move(request).value(), admission.tenant, *model, deadline,
      [this, tenant = admission.tenant, done = std::move(done), shares = std::move(shares).value()](
          Result<InferAnswer> result, net::HttpResponse error) mutable {
        if (!result.ok()) {
          shares.reset();
          return done({error.status, ErrorMessageOf(error), std::nullopt});
        }
        // This is the backend's thread: the answer is decoded and handed on from the parse pool
        // (where the caller also writes its message), in its tenant's turn; the request keeps its
        // shares until then, so that a tenant's answers waiting there are bounded by its share.
        auto finish = [done = std::move(done), answer = std::move(result).value(),
                       shares = std::move(shares)](const Status& go) mutable {
          const auto release = std::move(shares);
          if (!go.ok()) return done({503, std::string(go.message()), std::nullopt});
          Result<InferResponse> response = TakeAnswer(std::move(answer));
          if (!response.ok()) return done({500, response.status().message(), std::nullopt});
          done({200, "", std::move(response).value()});
        };
        auto job = std::make_shared<decltype(finish)>(std::move(finish));
        if (parse_pool_ != nullptr) {
          const Status queued = parse_pool_->Submit(
              tenant, [job](const Status& go) { (*job)(go); }, /*bounded=*/false);
          if (queued.ok()) return;  // else the pool has stopped (shutdown): answered here
        }
        (*job)(Status::Ok());
      });
  if (ticket == 0) return [] {};
  return [this, ticket] { backend_.Cancel(ticket); };
}

}  // namespace gshare::serve
