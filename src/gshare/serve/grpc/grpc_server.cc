// gRPC first: Abseil's annotation macros, which it includes, give way to gshare's.
#include <grpcpp/grpcpp.h>

#include "gshare/serve/grpc/grpc_server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/protocol/grpc/grpc_codec.h"
#include "gshare/protocol/grpc/inference.grpc.pb.h"
#include "gshare/serve/http_util.h"

namespace gshare::serve {
namespace {

using nlohmann::json;

grpc::Status GrpcStatus(int http_status, const std::string& message) {
  return {static_cast<grpc::StatusCode>(GrpcCodeFor(http_status)), message};
}

std::string Authorization(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// A model name as a path segment: printable ASCII without the characters a path gives meaning to.
// Anything else names no model (the HTTP path could not carry it either).
bool PathSafe(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return c > 0x20 && c < 0x7f && c != '/' && c != '?' && c != '#' && c != '%';
  });
}

std::string ModelTarget(const std::string& name, const std::string& version,
                        std::string_view action) {
  std::string target = "/v2/models/" + name;
  if (!version.empty()) target += "/versions/" + version;
  if (!action.empty()) target += "/" + std::string(action);
  return target;
}

json ParameterValue(const inference::ModelRepositoryParameter& parameter) {
  switch (parameter.parameter_choice_case()) {
    case inference::ModelRepositoryParameter::kBoolParam:
      return parameter.bool_param();
    case inference::ModelRepositoryParameter::kInt64Param:
      return parameter.int64_param();
    case inference::ModelRepositoryParameter::kStringParam:
      return parameter.string_param();
    default:
      return nullptr;  // bytes (model files): refused by the repository endpoint as unknown
  }
}

template <typename Map>
json RepositoryParameters(const Map& parameters) {
  json object = json::object();
  for (const auto& [name, value] : parameters) object[name] = ParameterValue(value);
  return object;
}

void FillTensors(
    const json& list,
    google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out) {
  if (!list.is_array()) return;
  for (const json& tensor : list) {
    auto* entry = out->Add();
    entry->set_name(tensor.value("name", ""));
    entry->set_datatype(tensor.value("datatype", ""));
    if (tensor.contains("shape") && tensor["shape"].is_array()) {
      for (const json& dim : tensor["shape"]) entry->add_shape(dim.get<std::int64_t>());
    }
  }
}

inference::DataType ConfigType(const json& tensor) {
  inference::DataType type = inference::TYPE_INVALID;
  inference::DataType_Parse(tensor.value("data_type", ""), &type);
  return type;
}

void FillDuration(const json& pair, inference::StatisticDuration* out) {
  if (!pair.is_object()) return;
  out->set_count(pair.value("count", std::uint64_t{0}));
  out->set_ns(pair.value("ns", std::uint64_t{0}));
}

// For ServerReady and ModelReady: the 503 of "not ready" answers `ready: false`, not an error.
template <typename Response>
std::function<std::optional<grpc::Status>(const net::HttpResponse&)> NotReadyIsFalse(
    Response* response) {
  return [response](const net::HttpResponse& answer) -> std::optional<grpc::Status> {
    if (answer.status != 503) return std::nullopt;
    response->set_ready(false);
    return grpc::Status::OK;
  };
}

}  // namespace

int GrpcCodeFor(int http_status) {
  switch (http_status) {
    case 200:
      return grpc::OK;
    case 400:
      return grpc::INVALID_ARGUMENT;
    case 401:
      return grpc::UNAUTHENTICATED;
    case 403:
      return grpc::PERMISSION_DENIED;
    case 404:
      return grpc::NOT_FOUND;
    case 405:
      return grpc::UNIMPLEMENTED;
    case 409:
      return grpc::ALREADY_EXISTS;
    case 408:
    case 504:
      return grpc::DEADLINE_EXCEEDED;
    case 499:
      return grpc::CANCELLED;
    case 413:
    case 429:
    case 507:
      return grpc::RESOURCE_EXHAUSTED;
    case 503:
      return grpc::UNAVAILABLE;
    default:
      return http_status >= 500 ? grpc::INTERNAL : grpc::UNKNOWN;
  }
}

class GrpcServer::Service final : public inference::GRPCInferenceService::CallbackService {
 public:
  Service(GrpcServerOptions options, Front& front, HttpHandler http)
      : options_(std::move(options)), front_(front), http_(std::move(http)) {}

  // Makes the HTTP request `method target` with `body` on the caller's behalf; `fill` turns a 200
  // answer's JSON into the response (an error status for an answer it cannot take), and `other`
  // may answer a status other than 200 itself (ready: false for 503).
  grpc::ServerUnaryReactor* ViaHttp(
      grpc::CallbackServerContext* context, std::string method, std::string target,
      std::string body, std::function<grpc::Status(const json&)> fill,
      std::function<std::optional<grpc::Status>(const net::HttpResponse&)> other = {}) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    net::ServerRequest request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.authorization = Authorization(*context);
    request.declared_length = body.size();
    request.body = std::move(body);
    auto detached = net::Responder::ToCallback(
        [reactor, fill = std::move(fill), other = std::move(other)](net::HttpResponse answer) {
          if (answer.status != 200) {
            if (other) {
              if (auto status = other(answer)) return reactor->Finish(*status);
            }
            return reactor->Finish(GrpcStatus(answer.status, ErrorMessageOf(answer)));
          }
          const json parsed = json::parse(answer.body, nullptr, false);
          if (parsed.is_discarded()) {
            return reactor->Finish(grpc::Status(grpc::INTERNAL, "the answer is not JSON"));
          }
          reactor->Finish(fill(parsed));
        });
    http_(std::move(request), std::move(detached.responder));
    return reactor;
  }

  // A call that names a model: one no path can carry is unknown.
  grpc::ServerUnaryReactor* ModelCall(
      grpc::CallbackServerContext* context, const std::string& name, const std::string& version,
      std::string_view action, std::function<grpc::Status(const json&)> fill,
      std::function<std::optional<grpc::Status>(const net::HttpResponse&)> other = {}) {
    if (!PathSafe(name) || (!version.empty() && !PathSafe(version))) {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      reactor->Finish(grpc::Status(grpc::NOT_FOUND, "model '" + name + "' not found"));
      return reactor;
    }
    return ViaHttp(context, "GET", ModelTarget(name, version, action), "", std::move(fill),
                   std::move(other));
  }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    return ViaHttp(context, "GET", "/v2/health/live", "", [response](const json& answer) {
      response->set_live(answer.value("live", false));
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) override {
    return ViaHttp(
        context, "GET", "/v2/health/ready", "",
        [response](const json& answer) {
          response->set_ready(answer.value("ready", false));
          return grpc::Status::OK;
        },
        NotReadyIsFalse(response));
  }

  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override {
    return ModelCall(
        context, request->name(), request->version(), "ready",
        [response](const json& answer) {
          response->set_ready(answer.value("ready", false));
          return grpc::Status::OK;
        },
        NotReadyIsFalse(response));
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override {
    return ViaHttp(context, "GET", "/v2", "", [response](const json& answer) {
      response->set_name(answer.value("name", ""));
      response->set_version(answer.value("version", ""));
      if (answer.contains("extensions") && answer["extensions"].is_array()) {
        for (const json& extension : answer["extensions"]) {
          response->add_extensions(extension.get<std::string>());
        }
      }
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    return ModelCall(context, request->name(), request->version(), "",
                     [response](const json& answer) {
                       response->set_name(answer.value("name", ""));
                       if (answer.contains("versions") && answer["versions"].is_array()) {
                         for (const json& v : answer["versions"]) {
                           response->add_versions(v.get<std::string>());
                         }
                       }
                       response->set_platform(answer.value("platform", ""));
                       FillTensors(answer.value("inputs", json()), response->mutable_inputs());
                       FillTensors(answer.value("outputs", json()), response->mutable_outputs());
                       return grpc::Status::OK;
                     });
  }

  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override {
    return ModelCall(context, request->name(), request->version(), "config",
                     [response](const json& answer) {
                       inference::ModelConfig* config = response->mutable_config();
                       config->set_name(answer.value("name", ""));
                       config->set_platform(answer.value("platform", ""));
                       config->set_backend(answer.value("backend", ""));
                       config->set_max_batch_size(answer.value("max_batch_size", 0));
                       for (const json& tensor : answer.value("input", json::array())) {
                         auto* input = config->add_input();
                         input->set_name(tensor.value("name", ""));
                         input->set_data_type(ConfigType(tensor));
                         for (const json& d : tensor.value("dims", json::array())) {
                           input->add_dims(d.get<std::int64_t>());
                         }
                       }
                       for (const json& tensor : answer.value("output", json::array())) {
                         auto* output = config->add_output();
                         output->set_name(tensor.value("name", ""));
                         output->set_data_type(ConfigType(tensor));
                         for (const json& d : tensor.value("dims", json::array())) {
                           output->add_dims(d.get<std::int64_t>());
                         }
                       }
                       return grpc::Status::OK;
                     });
  }

  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override {
    const auto fill = [response](const json& answer) {
      for (const json& model : answer.value("model_stats", json::array())) {
        auto* stats = response->add_model_stats();
        stats->set_name(model.value("name", ""));
        stats->set_version(model.value("version", ""));
        stats->set_last_inference(model.value("last_inference", std::uint64_t{0}));
        stats->set_inference_count(model.value("inference_count", std::uint64_t{0}));
        stats->set_execution_count(model.value("execution_count", std::uint64_t{0}));
        const json inference = model.value("inference_stats", json::object());
        auto* out = stats->mutable_inference_stats();
        FillDuration(inference.value("success", json()), out->mutable_success());
        FillDuration(inference.value("fail", json()), out->mutable_fail());
        FillDuration(inference.value("queue", json()), out->mutable_queue());
        FillDuration(inference.value("compute_input", json()), out->mutable_compute_input());
        FillDuration(inference.value("compute_infer", json()), out->mutable_compute_infer());
        FillDuration(inference.value("compute_output", json()), out->mutable_compute_output());
      }
      return grpc::Status::OK;
    };
    if (request->name().empty()) return ViaHttp(context, "GET", "/v2/models/stats", "", fill);
    return ModelCall(context, request->name(), request->version(), "stats", fill);
  }

  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override {
    return ViaHttp(context, "POST", "/v2/repository/index",
                   json{{"ready", request->ready()}}.dump(), [response](const json& answer) {
                     if (!answer.is_array()) return grpc::Status::OK;
                     for (const json& model : answer) {
                       auto* entry = response->add_models();
                       entry->set_name(model.value("name", ""));
                       entry->set_version(model.value("version", ""));
                       entry->set_state(model.value("state", ""));
                       entry->set_reason(model.value("reason", ""));
                     }
                     return grpc::Status::OK;
                   });
  }

  template <typename Request>
  grpc::ServerUnaryReactor* LoadOrUnload(grpc::CallbackServerContext* context,
                                         const Request& request, std::string_view action) {
    if (!PathSafe(request.model_name())) {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      reactor->Finish(
          grpc::Status(grpc::NOT_FOUND, "model '" + request.model_name() + "' not found"));
      return reactor;
    }
    json body = json::object();
    if (!request.parameters().empty())
      body["parameters"] = RepositoryParameters(request.parameters());
    return ViaHttp(context, "POST",
                   "/v2/repository/models/" + request.model_name() + "/" + std::string(action),
                   body.dump(), [](const json&) { return grpc::Status::OK; });
  }

  grpc::ServerUnaryReactor* RepositoryModelLoad(
      grpc::CallbackServerContext* context, const inference::RepositoryModelLoadRequest* request,
      inference::RepositoryModelLoadResponse*) override {
    return LoadOrUnload(context, *request, "load");
  }

  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
      inference::RepositoryModelUnloadResponse*) override {
    return LoadOrUnload(context, *request, "unload");
  }

  // One unary inference: its answer, its cancellation.
  class InferCall final : public grpc::ServerUnaryReactor {
   public:
    explicit InferCall(inference::ModelInferResponse* response) : response_(response) {}

    // Finishes with `outcome`, once.
    void Finish(Front::ParsedOutcome outcome) {
      {
        std::lock_guard lock(mutex_);
        if (finished_) return;
        finished_ = true;
      }
      if (outcome.status != 200 || !outcome.response) {
        return grpc::ServerUnaryReactor::Finish(GrpcStatus(outcome.status, outcome.message));
      }
      ToGrpc(*outcome.response, *response_);
      grpc::ServerUnaryReactor::Finish(grpc::Status::OK);
    }
    void SetCancel(std::function<void()> cancel) {
      bool now = false;
      {
        std::lock_guard lock(mutex_);
        cancel_ = std::move(cancel);
        now = cancelled_;
      }
      if (now) cancel_();
    }
    void OnCancel() override {
      std::function<void()> cancel;
      {
        std::lock_guard lock(mutex_);
        cancelled_ = true;
        cancel = cancel_;
      }
      if (cancel) cancel();
    }
    // The front's callback holds a reference until it ran: the call is freed by the last of the
    // two, OnDone or Release.
    void OnDone() override { Release(); }
    void Hold() {
      std::lock_guard lock(mutex_);
      ++references_;
    }
    void Release() {
      bool last = false;
      {
        std::lock_guard lock(mutex_);
        last = --references_ == 0;
      }
      if (last) delete this;
    }

   private:
    inference::ModelInferResponse* const response_;
    std::mutex mutex_;
    bool finished_ = false;
    bool cancelled_ = false;
    int references_ = 1;  // gRPC's, until OnDone
    std::function<void()> cancel_;
  };

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    auto* call = new InferCall(response);
    Infer(
        Authorization(*context), *request,
        [call](Front::ParsedOutcome outcome) { call->Finish(std::move(outcome)); }, call);
    return call;
  }

  // Hands `request` to the front, which parses it once its key, size and shares passed; `done` is
  // called once. `call` (may be null) is held until `done` has run and gets the cancellation.
  // Returns the cancellation.
  std::function<void()> Infer(const std::string& authorization,
                              const inference::ModelInferRequest& request,
                              std::function<void(Front::ParsedOutcome)> done, InferCall* call) {
    if (call) {
      call->Hold();  // for the front's callback
      call->Hold();  // for this scope: the callback may run and gRPC end the call before SetCancel
    }
    std::optional<std::string_view> version;
    if (!request.model_version().empty()) version = request.model_version();
    std::function<void()> cancel = [] {};
    if (!PathSafe(request.model_name()) || (version && !PathSafe(request.model_version()))) {
      front_.InferenceAnswered("grpc", 404);
      done({404, "model '" + request.model_name() + "' not found", std::nullopt});
      if (call) call->Release();  // the front's callback's: it never runs
    } else {
      cancel = front_.InferParsed(
          authorization, request.model_name(), version, WireBytes(request),
          [&] { return FromGrpc(request, options_.parse_limits); },
          [done = std::move(done), call](Front::ParsedOutcome outcome) {
            done(std::move(outcome));
            if (call) call->Release();
          });
    }
    if (call) {
      call->SetCancel(cancel);
      call->Release();
    }
    return cancel;
  }

  // One stream of inferences: reads requests (at most kStreamInFlight unanswered), answers each in
  // the order they finish, one write at a time; finishes once the client has stopped sending and
  // every answer is written. A cancelled stream cancels its requests that have not started and
  // finishes once every one has answered (its answers are dropped).
  //
  // Lifetime: gRPC deletes the stream (OnDone) once Finish was called and its own callbacks have
  // returned; an answer comes on another thread, so whoever calls Finish touches nothing after.
  class Stream final : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                                      inference::ModelStreamInferResponse> {
   public:
    Stream(Service& service, std::string authorization)
        : service_(service), authorization_(std::move(authorization)) {
      StartRead(&request_);
    }

    void OnReadDone(bool ok) override {
      std::uint64_t number = 0;
      inference::ModelInferRequest request;
      {
        std::unique_lock lock(mutex_);
        if (!ok || cancelled_ || finished_) {
          reading_ = false;
          const bool finish = ShouldFinishLocked();
          lock.unlock();
          if (finish) Finish(grpc::Status::OK);
          return;
        }
        request = std::move(request_);
        number = ++requests_;
        ++pending_;
        cancels_[number] = [] {};
      }
      auto cancel = service_.Infer(
          authorization_, request,
          [this, number, id = request.id(), model = request.model_name()](
              Front::ParsedOutcome outcome) { Answer(number, id, model, std::move(outcome)); },
          nullptr);
      std::unique_lock lock(mutex_);
      if (auto it = cancels_.find(number); it != cancels_.end()) it->second = cancel;
      if (cancelled_) {  // cancelled meanwhile: this one too, and no more reading
        reading_ = false;
        const bool finish = ShouldFinishLocked();
        lock.unlock();
        cancel();
        if (finish) Finish(grpc::Status::OK);
        return;
      }
      if (pending_ < kStreamInFlight) {
        StartRead(&request_);
      } else {
        paused_ = true;
      }
    }

    void OnWriteDone(bool ok) override {
      std::unique_lock lock(mutex_);
      writes_.pop_front();
      if (!ok) CancelLocked(lock);
      if (!writes_.empty()) {
        StartWrite(&writes_.front());
      } else {
        writing_ = false;
      }
      const bool finish = ShouldFinishLocked();
      lock.unlock();
      if (finish) Finish(grpc::Status::OK);
    }

    void OnCancel() override {
      std::unique_lock lock(mutex_);
      CancelLocked(lock);
      const bool finish = ShouldFinishLocked();
      lock.unlock();
      if (finish) Finish(grpc::Status::OK);
    }

    void OnDone() override { delete this; }

   private:
    // Marks the stream cancelled and cancels its pending requests (outside the lock, which it
    // takes back).
    void CancelLocked(std::unique_lock<std::mutex>& lock) {
      if (cancelled_) return;
      cancelled_ = true;
      writes_.erase(writes_.begin() + (writing_ ? 1 : 0), writes_.end());
      std::vector<std::function<void()>> cancels;
      for (auto& [number, cancel] : cancels_) cancels.push_back(cancel);
      lock.unlock();
      for (auto& cancel : cancels) cancel();
      lock.lock();
    }

    // An answer, on the front's or the backend's thread.
    void Answer(std::uint64_t number, const std::string& id, const std::string& model,
                Front::ParsedOutcome outcome) {
      inference::ModelStreamInferResponse answer;
      if (outcome.status == 200 && outcome.response) {
        ToGrpc(*outcome.response, *answer.mutable_infer_response());
      } else {
        answer.set_error_message(outcome.message);
        answer.mutable_infer_response()->set_id(id);  // which request failed
        answer.mutable_infer_response()->set_model_name(model);
      }
      std::unique_lock lock(mutex_);
      --pending_;
      cancels_.erase(number);
      if (!cancelled_) {
        if (paused_) {
          paused_ = false;
          StartRead(&request_);
        }
        writes_.push_back(std::move(answer));
        if (!writing_) {
          writing_ = true;
          StartWrite(&writes_.front());
        }
      }
      const bool finish = ShouldFinishLocked();
      lock.unlock();
      if (finish) Finish(grpc::Status::OK);  // the last thing: the stream may be gone after it
    }

    // Whether to finish now (then it is marked finished): nothing pending, nothing being written,
    // and no more reading.
    bool ShouldFinishLocked() {
      if (finished_ || pending_ > 0 || writing_) return false;
      if (reading_ && !cancelled_) return false;
      finished_ = true;
      return true;
    }

    Service& service_;
    const std::string authorization_;
    inference::ModelInferRequest request_;
    std::mutex mutex_;
    bool reading_ = true;  // a read is outstanding or will be started
    bool paused_ = false;  // reading waits for an answer
    bool cancelled_ = false;
    bool writing_ = false;
    bool finished_ = false;
    std::uint64_t requests_ = 0;                              // read so far: each one's number
    std::size_t pending_ = 0;                                 // requests handed on, not answered
    std::map<std::uint64_t, std::function<void()>> cancels_;  // of the pending ones
    std::deque<inference::ModelStreamInferResponse> writes_;
  };

  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext* context) override {
    return new Stream(*this, Authorization(*context));
  }

 private:
  const GrpcServerOptions options_;
  Front& front_;
  const HttpHandler http_;
};

Result<std::unique_ptr<GrpcServer>> GrpcServer::Start(GrpcServerOptions options, Front& front,
                                                      HttpHandler http) {
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  const std::string listen = options.listen;
  // Room for the largest body the front takes, and the message's framing.
  const auto max_message = static_cast<int>(std::min<std::size_t>(
      options.parse_limits.max_text_bytes + (1 << 20), std::numeric_limits<int>::max()));
  server->service_ = std::make_unique<Service>(std::move(options), front, std::move(http));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &server->port_);
  // No SO_REUSEPORT: a port another server holds is an error here, not a port shared with it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return Unavailable(
        fmt::format("cannot serve gRPC on {} (taken, or not an address here)", listen));
  }
  return server;
}

void GrpcServer::BeginShutdown(std::chrono::milliseconds drain) {
  std::lock_guard lock(shutdown_mutex_);
  if (shutdown_.joinable() || !server_) return;
  shutdown_ = std::thread([this, drain] { server_->Shutdown(SystemTimeAfter(drain)); });
}

void GrpcServer::Wait() {
  if (!server_) return;
  BeginShutdown(std::chrono::milliseconds(0));
  {
    std::lock_guard lock(shutdown_mutex_);
    if (shutdown_.joinable()) shutdown_.join();
  }
  server_->Wait();
}

GrpcServer::~GrpcServer() { Wait(); }

}  // namespace gshare::serve
