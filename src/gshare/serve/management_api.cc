#include "gshare/serve/management_api.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "gshare/common/units.h"
#include "gshare/model/catalog.h"
#include "gshare/serve/front.h"
#include "gshare/serve/http_util.h"
#include "gshare/serve/log_tail.h"

namespace gshare::serve {
namespace {

using net::HttpResponse;
using net::JsonErrorResponse;
using nlohmann::json;

constexpr std::string_view kAdminKeyOnTenantEndpoint =
    "the admin key is not a tenant's key; manage a tenant's functions at "
    "/api/v1/tenants/{tenant}/functions";

// The one answer for a function the caller cannot see in its namespace, whether or not another
// tenant has one by that name.
HttpResponse FunctionNotFound(std::string_view name) {
  return JsonErrorResponse(404, "function '" + std::string(name) + "' not found");
}

// An error of the deployer or of a check on the caller's input: its message is for the caller.
HttpResponse ErrorResponse(const Status& status) {
  return JsonErrorResponse(HttpStatusFor(status.code()), status.message());
}

// The body as a JSON value, or 400 with the parser's message.
Result<json> ParseJsonBody(std::string_view body) {
  try {
    return json::parse(body);
  } catch (const json::exception& e) {
    return InvalidArgument(fmt::format("the request body is not JSON: {}", e.what()));
  }
}

// The deployer's state of a function, or UNAVAILABLE with the reason it cannot tell (a function
// the registry holds but the node does not serve: its deploy at start failed).
ModelStatus StatusOrUnavailable(const Deployer& deployer, std::string_view tenant,
                                std::string_view name) {
  Result<ModelStatus> status = deployer.StatusOf(tenant, name);
  if (status.ok()) return std::move(status).value();
  return ModelStatus{ModelState::kUnavailable, status.status().message()};
}

// `spec_yaml` with the paths inside the tenant's model folder `models` given relative to it, as the
// tenant wrote them (they resolve to the same files when the spec is sent back): the node's own
// folders are not the tenant's to read.
std::string WithRelativePaths(std::string spec_yaml, const std::filesystem::path& models) {
  const std::string prefix = models.string() + "/";
  for (std::size_t at = spec_yaml.find(prefix); at != std::string::npos;
       at = spec_yaml.find(prefix, at)) {
    spec_yaml.erase(at, prefix.size());
  }
  return spec_yaml;
}

// A function as the API answers it: its record with the deployer's state.
json FunctionJson(const Deployer& deployer, const FunctionRecord& record, bool kept_warm,
                  const std::filesystem::path& data_dir) {
  const ModelStatus model = StatusOrUnavailable(deployer, record.tenant, record.name);
  return {{"tenant", record.tenant},
          {"name", record.name},
          {"state", ModelStateName(model.state)},
          {"reason", model.reason},
          {"kept_warm", kept_warm},
          {"created_unix_ms", record.created_unix_ms},
          {"updated_unix_ms", record.updated_unix_ms},
          {"spec", WithRelativePaths(record.spec_yaml, data_dir / "models" / record.tenant)}};
}

HttpResponse NoContent() { return {.status = 204, .body = ""}; }

json TenantJson(const TenantRecord& tenant) {
  return {{"name", tenant.name},
          {"created_unix_ms", tenant.created_unix_ms},
          {"functions", tenant.function_count}};
}

// `a + b`, or the largest value where it would overflow.
std::uint64_t SaturatingAdd(std::uint64_t a, std::uint64_t b) {
  return b > std::numeric_limits<std::uint64_t>::max() - a
             ? std::numeric_limits<std::uint64_t>::max()
             : a + b;
}

// The `tail` of a logs request's query: 100 without one, 400 unless a whole number from 1 to
// kMaxLogTailLines.
Result<std::size_t> TailLines(std::string_view target) {
  const std::size_t question = target.find('?');
  if (question == std::string_view::npos) return std::size_t{100};
  std::string_view query = target.substr(question + 1);
  std::optional<std::size_t> lines;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (!pair.starts_with("tail=")) continue;
    const std::string_view value = pair.substr(5);
    std::size_t parsed = 0;
    const bool digits =
        !value.empty() && value.size() <= 6 &&
        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) parsed = std::stoul(std::string(value));
    if (!digits || parsed == 0 || parsed > kMaxLogTailLines) {
      return InvalidArgument(
          fmt::format("tail must be a whole number of lines from 1 to {}", kMaxLogTailLines));
    }
    lines = parsed;
  }
  return lines.value_or(100);
}

}  // namespace

// An error of the registry. Its client errors (a taken name, an unknown tenant, a malformed name)
// reach the caller as they are; its own failures (a locked or broken database) name the database
// file and the statement, which are the server's business: they go to the log, and the caller
// learns only that the registry failed.
net::HttpResponse RegistryErrorResponse(const Status& status) {
  const int http_status = HttpStatusFor(status.code());
  if (http_status < 500) return ErrorResponse(status);
  spdlog::error("management API: {}", status.ToString());
  return JsonErrorResponse(http_status, http_status == 503
                                            ? "the registry is busy; try again"
                                            : "the registry failed; the server's log says why");
}

ManagementApi::ManagementApi(ManagementApiOptions options, Registry& registry, TenantKeys& keys,
                             Deployer& deployer)
    : options_(std::move(options)), registry_(registry), keys_(keys), deployer_(deployer) {
  worker_ = std::thread([this] { Work(); });
}

ManagementApi::~ManagementApi() {
  {
    MutexLock lock(queue_mutex_);
    stopping_ = true;
  }
  queue_changed_.NotifyAll();
  worker_.join();
}

bool ManagementApi::Serves(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  for (const std::string_view prefix :
       {std::string_view("/api"), std::string_view("/v2/repository")}) {
    if (path.starts_with(prefix) && (path.size() == prefix.size() || path[prefix.size()] == '/')) {
      return true;
    }
  }
  return false;
}

bool ManagementApi::IsUpload(std::string_view method, std::string_view target) {
  if (method != "PUT") return false;
  const auto path = PathSegments(target);
  const std::optional<Route> route = path ? Match(*path) : std::nullopt;
  return route && route->put == Operation::kPutFile;
}

net::HttpServer::Handler ManagementApi::Handler() {
  return [this](net::ServerRequest request, net::Responder responder) {
    Handle(std::move(request), std::move(responder));
  };
}

std::optional<ManagementApi::Route> ManagementApi::Match(
    const std::vector<std::string_view>& segments) {
  Route route;
  const auto functions = [&](std::size_t at) {
    if (segments.size() == at + 1) {
      route.get = Operation::kListFunctions;
      route.post = Operation::kCreateFunction;
    } else if (segments.size() == at + 2) {
      route.get = Operation::kGetFunction;
      route.put = Operation::kUpdateFunction;
      route.remove = Operation::kDeleteFunction;
      route.name = segments[at + 1];
    } else if (segments.size() == at + 3 && segments[at + 2] == "logs") {
      route.get = Operation::kFunctionLogs;
      route.name = segments[at + 1];
    }
  };
  // Files: the folder, or one file whose name is the rest of the path (parts and all).
  const auto files = [&](std::size_t at) {
    if (segments.size() == at + 1) {
      route.get = Operation::kListFiles;
    } else {
      route.get = Operation::kGetFile;
      route.put = Operation::kPutFile;
      route.remove = Operation::kDeleteFile;
      const std::string_view first = segments[at + 1];
      const std::string_view last = segments.back();
      route.name = std::string_view(
          first.data(), static_cast<std::size_t>(last.data() + last.size() - first.data()));
    }
  };
  const std::size_t count = segments.size();
  if (count >= 3 && segments[0] == "api" && segments[1] == "v1") {
    if (segments[2] == "files") {
      files(2);
    } else if (segments[2] == "functions") {
      functions(2);
    } else if (segments[2] == "tenants") {
      route.admin_endpoint = true;
      if (count == 3) {
        route.get = Operation::kListTenants;
        route.post = Operation::kAddTenant;
      } else {
        route.tenant = segments[3];
        if (count == 4) {
          route.get = Operation::kGetTenant;
          route.remove = Operation::kRemoveTenant;
        } else if (count == 5 && segments[4] == "keys") {
          route.post = Operation::kRotateKey;
        } else if (segments[4] == "functions") {
          functions(4);
        } else if (segments[4] == "files") {
          files(4);
        }
      }
    }
  } else if (count == 3 && segments[0] == "v2" && segments[1] == "repository" &&
             segments[2] == "index") {
    route.post = Operation::kRepositoryIndex;
  } else if (count == 5 && segments[0] == "v2" && segments[1] == "repository" &&
             segments[2] == "models" && (segments[4] == "load" || segments[4] == "unload")) {
    route.post = segments[4] == "load" ? Operation::kLoad : Operation::kUnload;
    route.name = segments[3];
  }
  if (!route.get && !route.post && !route.put && !route.remove) return std::nullopt;
  return route;
}

ManagementApi::Admission ManagementApi::Admit(const net::ServerRequest& request) const {
  Admission admission;
  const auto refuse = [&](HttpResponse response) {
    admission.refusal = std::move(response);
    return admission;
  };
  // The order of the checks depends on nothing a caller cannot see: the path, the method, the
  // key, the key's role, the body's size; then the worker looks at names.
  const auto path = PathSegments(request.target);
  std::optional<Route> route = path ? Match(*path) : std::nullopt;
  if (route && route->get &&
      (*route->get == Operation::kListFiles || *route->get == Operation::kGetFile) &&
      options_.files == nullptr) {
    route.reset();  // no file store: no files API
  }
  if (!route) return refuse(JsonErrorResponse(404, "not found"));

  std::optional<Operation> operation;
  if (request.method == "GET" || request.method == "HEAD") {
    operation = route->get;
  } else if (request.method == "POST") {
    operation = route->post;
  } else if (request.method == "PUT") {
    operation = route->put;
  } else if (request.method == "DELETE") {
    operation = route->remove;
  }
  if (!operation) {
    std::vector<std::string_view> allowed;
    if (route->get) allowed.insert(allowed.end(), {"GET", "HEAD"});
    if (route->post) allowed.push_back("POST");
    if (route->put) allowed.push_back("PUT");
    if (route->remove) allowed.push_back("DELETE");
    return refuse(MethodNotAllowed(fmt::format("{}", fmt::join(allowed, ", "))));
  }

  // Keys: the admin's, or a tenant's.
  if (request.authorization.empty()) {
    return refuse(Unauthorized("an API key is required: Authorization: Bearer <key>", "Bearer"));
  }
  const std::optional<std::string_view> key = BearerToken(request.authorization);
  const bool admin = key && keys_.Matches(*key, options_.admin_key_hash);
  std::optional<std::string> tenant;
  if (key && !admin) tenant = keys_.Authenticate(*key);
  if (!admin && !tenant) {
    return refuse(Unauthorized("the API key is not valid", "Bearer error=\"invalid_token\""));
  }
  if (route->admin_endpoint && !admin) {
    return refuse(JsonErrorResponse(403, "this endpoint needs the admin key"));
  }
  if (!route->admin_endpoint && admin) {
    return refuse(JsonErrorResponse(403, kAdminKeyOnTenantEndpoint));
  }
  const std::uint64_t body_bytes =
      request.body.empty() ? request.declared_length.value_or(0) : request.body.size();
  if (body_bytes > kMaxManagementBodyBytes && *operation != Operation::kPutFile) {
    return refuse(JsonErrorResponse(
        413, fmt::format("the request body is {} bytes; a management request takes at most {}",
                         body_bytes, kMaxManagementBodyBytes)));
  }
  if (*operation == Operation::kFunctionLogs) {
    auto lines = TailLines(request.target);
    if (!lines.ok()) return refuse(JsonErrorResponse(400, lines.status().message()));
    admission.lines = *lines;
  }
  admission.operation = *operation;
  admission.tenant = admin ? std::string(route->tenant) : *std::move(tenant);
  admission.name = std::string(route->name);
  admission.by_admin = admin;
  return admission;
}

std::optional<HttpResponse> ManagementApi::CheckHead(net::ServerRequest& head) const {
  Admission admission = Admit(head);
  if (admission.refusal || admission.operation != Operation::kPutFile) return admission.refusal;
  HttpResponse refusal;
  auto upload = BeginUpload(admission.tenant, admission.name, head.declared_length, refusal);
  if (!upload.ok()) return refusal;
  head.body_sink = *std::move(upload);
  head.body_sink_limit = options_.files->options().max_file_bytes;
  return std::nullopt;
}

void ManagementApi::Handle(net::ServerRequest request, net::Responder responder) {
  Admission admission = Admit(request);
  if (admission.refusal) return responder.Respond(std::move(*admission.refusal));
  std::shared_ptr<ModelFileUpload> upload;
  if (admission.operation == Operation::kPutFile) {
    upload = std::dynamic_pointer_cast<ModelFileUpload>(request.body_sink);
    if (!upload) {
      // Came without the header check (its body is in memory): stored the same way.
      HttpResponse refusal;
      auto begun = BeginUpload(admission.tenant, admission.name, request.body.size(), refusal);
      if (!begun.ok()) return responder.Respond(std::move(refusal));
      if (auto refused = (*begun)->Append(request.body)) return responder.Respond(*refused);
      upload = *std::move(begun);
      request.body.clear();
    }
  }
  Job job{.operation = admission.operation,
          .tenant = std::move(admission.tenant),
          .name = std::move(admission.name),
          .by_admin = admission.by_admin,
          .body = std::move(request.body),
          .responder = std::move(responder),
          .finish = {},
          .upload = std::move(upload),
          .lines = admission.lines};
  {
    MutexLock lock(queue_mutex_);
    if (!stopping_) {
      // Each caller's requests wait in a queue of its own, served in turn with the others'.
      const std::string owner = job.by_admin ? "admin" : "tenant " + job.tenant;
      queue_.Push(owner, std::move(job));
      queue_changed_.NotifyOne();
      return;
    }
  }
  job.responder.Respond(JsonErrorResponse(503, "the server is shutting down"));
}

void ManagementApi::Work() {
  while (true) {
    std::optional<Job> job;
    std::vector<Job> left;
    bool reconcile = false;
    {
      MutexLock lock(queue_mutex_);
      queue_changed_.Wait(queue_mutex_, [this]() REQUIRES(queue_mutex_) {
        return stopping_ || reconcile_pending_ || !queue_.empty();
      });
      if (stopping_) {
        left = queue_.TakeAll();
      } else if (reconcile_pending_) {
        // Before the next request: the keys are current for what the worker does next (a call
        // queued by a tenant removed meanwhile then finds no tenant in the registry).
        reconcile_pending_ = false;
        reconcile = true;
      } else {
        job = queue_.Pop();
      }
    }
    if (reconcile) {
      Reconcile();
      continue;
    }
    if (!job) {
      for (const Job& unanswered : left) {
        unanswered.responder.Respond(JsonErrorResponse(503, "the server is shutting down"));
      }
      return;
    }
    // A settled deploy's end runs whether or not its client is still there: the change was made,
    // and a failed one is undone.
    if (job->finish) {
      HttpResponse response;
      {
        MutexLock change(change_mutex_);
        response = job->finish();
      }
      job->responder.Respond(std::move(response));
      continue;
    }
    // A client that went away learns nothing from the answer, so a change it asked for is not
    // made: it may ask again and get the answer this time.
    if (job->responder.Cancelled()) continue;
    Answer response;
    {
      MutexLock change(change_mutex_);
      response = Execute(*job);
    }
    if (response) job->responder.Respond(std::move(*response));
  }
}

void ManagementApi::Continue(net::Responder responder, std::function<HttpResponse()> finish) {
  {
    MutexLock lock(queue_mutex_);
    if (!stopping_) {
      // The ends of deploys, in a queue of their own (they are short, and each answers a caller).
      queue_.Push("settled",
                  Job{.operation = Operation::kListFunctions,  // unused: `finish` answers
                      .tenant = {},
                      .name = {},
                      .by_admin = false,
                      .body = {},
                      .responder = responder,
                      .finish = std::move(finish),
                      .upload = {},
                      .lines = 0});
      queue_changed_.NotifyOne();
      return;
    }
  }
  responder.Respond(JsonErrorResponse(503, "the server is shutting down"));
}

Deployer::Settled ManagementApi::ThenOnWorker(net::Responder responder,
                                              std::function<HttpResponse(const Status&)> finish) {
  return
      [this, responder = std::move(responder), finish = std::move(finish)](Status settled) mutable {
        Continue(std::move(responder), [settled = std::move(settled), finish = std::move(finish)] {
          return finish(settled);
        });
      };
}

ManagementApi::Answer ManagementApi::Execute(const Job& job) {
  // An admin path names a tenant, which must exist: otherwise a spec would be admitted against
  // the model folder of a tenant nobody has.
  const bool in_namespace =
      job.operation == Operation::kListFunctions || job.operation == Operation::kCreateFunction ||
      job.operation == Operation::kGetFunction || job.operation == Operation::kUpdateFunction ||
      job.operation == Operation::kDeleteFunction || job.operation == Operation::kFunctionLogs ||
      job.operation == Operation::kListFiles || job.operation == Operation::kGetFile ||
      job.operation == Operation::kPutFile || job.operation == Operation::kDeleteFile;
  const bool file_operation =
      job.operation == Operation::kListFiles || job.operation == Operation::kGetFile ||
      job.operation == Operation::kPutFile || job.operation == Operation::kDeleteFile;
  // A tenant's key was checked on the io thread; a file operation queued behind the tenant's
  // removal must not make its folder again.
  if ((job.by_admin && in_namespace) || file_operation) {
    const Result<TenantRecord> tenant = registry_.GetTenant(job.tenant);
    if (!tenant.ok()) return RegistryErrorResponse(tenant.status());
  }
  switch (job.operation) {
    case Operation::kListFunctions:
      return ListFunctions(job.tenant);
    case Operation::kCreateFunction:
      return CreateFunction(job);
    case Operation::kGetFunction:
      return GetFunction(job.tenant, job.name);
    case Operation::kUpdateFunction:
      return UpdateFunction(job);
    case Operation::kDeleteFunction:
      return DeleteFunction(job.tenant, job.name);
    case Operation::kRepositoryIndex:
      return RepositoryIndex(job.tenant, job.body);
    case Operation::kLoad:
      return LoadOrUnload(job, /*load=*/true);
    case Operation::kUnload:
      return LoadOrUnload(job, /*load=*/false);
    case Operation::kListTenants:
      return ListTenants();
    case Operation::kAddTenant:
      return AddTenant(job.body);
    case Operation::kGetTenant:
      return GetTenant(job.tenant);
    case Operation::kRemoveTenant:
      return RemoveTenant(job.tenant);
    case Operation::kRotateKey:
      return RotateKey(job.tenant);
    case Operation::kFunctionLogs:
      return FunctionLogs(job.tenant, job.name, job.lines);
    case Operation::kListFiles:
      return ListFiles(job.tenant);
    case Operation::kGetFile:
      return GetFile(job.tenant, job.name);
    case Operation::kPutFile:
      return PutFile(job);
    case Operation::kDeleteFile:
      return DeleteFile(job.tenant, job.name);
  }
  return JsonErrorResponse(500, "an operation the management API does not know");
}

Result<FunctionSpec> ManagementApi::AdmitSpec(const std::string& tenant, std::string_view body,
                                              bool by_admin) const {
  GSHARE_ASSIGN_OR_RETURN(
      FunctionSpec spec,
      ParseFunctionEntry(body, "the request body", tenant, options_.data_dir / "models" / tenant));
  if (spec.tenant != tenant) {
    return InvalidArgument(fmt::format(
        "the request body: function ({}): tenant: '{}' is not this namespace's tenant '{}'",
        spec.name, spec.tenant, tenant));
  }
  GSHARE_RETURN_IF_ERROR(deployer_.Admit(spec, by_admin));
  return spec;
}

namespace {

// What a function keeps in the node's snapshot pool: its warm instance's memory image.
std::uint64_t PoolBytes(const FunctionSpec& spec) {
  return std::max(spec.gpu_memory_bytes, spec.model_bytes);
}

}  // namespace

Result<std::vector<FunctionSpec>> ManagementApi::StoredSpecs(const std::string& tenant) {
  GSHARE_ASSIGN_OR_RETURN(const std::vector<FunctionRecord> records,
                          registry_.ListFunctions(tenant));
  std::vector<FunctionSpec> specs;
  for (const FunctionRecord& record : records) {
    Result<FunctionSpec> spec = ParseFunctionEntry(
        record.spec_yaml, fmt::format("the registry's {}/{}", record.tenant, record.name),
        record.tenant);
    // A stored spec was valid when written; one that no longer parses is the server's problem
    // (a GPU type this build dropped, say), not the caller's input.
    if (!spec.ok()) return Internal(spec.status().message());
    specs.push_back(std::move(spec).value());
  }
  return specs;
}

Status ManagementApi::CheckQuota(const FunctionSpec& spec) {
  GSHARE_ASSIGN_OR_RETURN(const std::vector<FunctionSpec> mine, StoredSpecs(spec.tenant));
  std::uint64_t others = 0;
  std::size_t other_count = 0;
  for (const FunctionSpec& other : mine) {
    if (other.name == spec.name) continue;
    others = SaturatingAdd(others, other.gpu_memory_bytes);
    ++other_count;
  }
  const std::size_t max_functions = options_.tenant_max_functions;
  if (max_functions > 0 && other_count + 1 > max_functions) {
    return ResourceExhausted(
        fmt::format("tenant '{}' has {} functions, its limit; delete one before creating '{}'",
                    spec.tenant, other_count, spec.name));
  }
  const std::uint64_t quota = options_.tenant_gpu_memory_bytes;
  const std::uint64_t total = SaturatingAdd(others, spec.gpu_memory_bytes);
  if (quota > 0 && total > quota) {
    return ResourceExhausted(fmt::format(
        "function '{}' needs {} of GPU memory and tenant '{}' holds {} in its other functions: "
        "{} in all, over the tenant's quota of {}",
        spec.name, FormatBytes(spec.gpu_memory_bytes), spec.tenant, FormatBytes(others),
        FormatBytes(total), FormatBytes(quota)));
  }
  return CheckPoolShare(spec);
}

Result<PoolPlan> ManagementApi::PlanPool(const FunctionSpec* candidate) {
  GSHARE_ASSIGN_OR_RETURN(const std::vector<TenantRecord> tenants, registry_.ListTenants());
  std::vector<PoolClaim> claims;
  std::int64_t candidate_created = std::numeric_limits<std::int64_t>::max();
  for (const TenantRecord& tenant : tenants) {
    GSHARE_ASSIGN_OR_RETURN(const std::vector<FunctionRecord> records,
                            registry_.ListFunctions(tenant.name));
    for (const FunctionRecord& record : records) {
      if (candidate != nullptr && record.tenant == candidate->tenant &&
          record.name == candidate->name) {
        candidate_created = record.created_unix_ms;  // an update keeps its place in the share
        continue;
      }
      Result<FunctionSpec> spec = ParseFunctionEntry(
          record.spec_yaml, fmt::format("the registry's {}/{}", record.tenant, record.name),
          record.tenant);
      if (!spec.ok()) return Internal(spec.status().message());
      claims.push_back({.tenant = record.tenant,
                        .name = record.name,
                        .bytes = PoolBytes(*spec),
                        .created_ms = record.created_unix_ms,
                        .changed_ms = record.updated_unix_ms});
    }
  }
  if (candidate != nullptr) {
    claims.push_back({.tenant = candidate->tenant,
                      .name = candidate->name,
                      .bytes = PoolBytes(*candidate),
                      .created_ms = candidate_created,
                      .changed_ms = std::numeric_limits<std::int64_t>::max()});
  }
  return PlanSnapshotPool(options_.snapshot_pool_bytes, std::move(claims));
}

Status ManagementApi::CheckPoolShare(const FunctionSpec& spec) {
  const std::uint64_t pool = options_.snapshot_pool_bytes;
  if (pool == 0) return Status::Ok();
  GSHARE_ASSIGN_OR_RETURN(const PoolPlan plan, PlanPool(&spec));
  if (plan.Warm(spec.tenant, spec.name)) return Status::Ok();
  const PoolPlan::Held mine = plan.HeldBy(spec.tenant);
  return ResourceExhausted(fmt::format(
      "function '{}' needs {} of the node's snapshot pool and tenant '{}' keeps {} of it warm, "
      "{} beyond its share of {} ({} of the pool among {} tenants with functions); the rest is "
      "held within the other tenants' shares or lent already ({} of {} in use)",
      spec.name, FormatBytes(PoolBytes(spec)), spec.tenant,
      FormatBytes(mine.within_share + mine.borrowed), FormatBytes(mine.borrowed),
      FormatBytes(plan.share_bytes), FormatBytes(pool), plan.tenants, FormatBytes(plan.warm_bytes),
      FormatBytes(pool)));
}

void ManagementApi::Replan() {
  if (options_.snapshot_pool_bytes == 0) return;
  const Result<PoolPlan> plan = PlanPool(nullptr);
  if (!plan.ok()) {
    spdlog::error("the snapshot pool could not be planned again: {}", plan.status().ToString());
    return;
  }
  std::map<FunctionKey, bool> next;
  for (const FunctionKey& key : plan->warm) next.emplace(key, true);
  for (const FunctionKey& key : plan->cold) next.emplace(key, false);
  for (const auto& [key, warm] : next) {
    const auto before = kept_warm_.find(key);
    if (before != kept_warm_.end() && before->second == warm) continue;
    deployer_.KeepWarm(key.first, key.second, warm);
    if (!warm) {
      spdlog::info(
          "function {}/{} is kept cold: the room it borrowed in the snapshot pool is "
          "another tenant's share now",
          key.first, key.second);
    } else if (before != kept_warm_.end()) {
      spdlog::info("function {}/{} is kept warm again", key.first, key.second);
    }
  }
  // A function gone from the registry is forgotten warm: a later one of its name starts warm.
  for (const auto& [key, warm] : kept_warm_) {
    if (!warm && !next.contains(key)) deployer_.KeepWarm(key.first, key.second, true);
  }
  kept_warm_ = std::move(next);
}

bool ManagementApi::KeptWarm(const std::string& tenant, const std::string& name) const {
  const auto it = kept_warm_.find(FunctionKey(tenant, name));
  return it == kept_warm_.end() || it->second;
}

HttpResponse ManagementApi::ListFunctions(const std::string& tenant) {
  const Result<std::vector<FunctionRecord>> records = registry_.ListFunctions(tenant);
  if (!records.ok()) return RegistryErrorResponse(records.status());
  json functions = json::array();
  for (const FunctionRecord& record : *records) {
    functions.push_back(
        FunctionJson(deployer_, record, KeptWarm(tenant, record.name), options_.data_dir));
  }
  return JsonResponse(200, {{"functions", std::move(functions)}});
}

HttpResponse ManagementApi::GetFunction(const std::string& tenant, const std::string& name) {
  const Result<FunctionRecord> record = registry_.GetFunction(tenant, name);
  if (record.status().code() == StatusCode::kNotFound) return FunctionNotFound(name);
  if (!record.ok()) return RegistryErrorResponse(record.status());
  return JsonResponse(200,
                      FunctionJson(deployer_, *record, KeptWarm(tenant, name), options_.data_dir));
}

ManagementApi::Answer ManagementApi::CreateFunction(const Job& job) {
  const std::string& tenant = job.tenant;
  const Result<FunctionSpec> spec = AdmitSpec(tenant, job.body, job.by_admin);
  if (!spec.ok()) return ErrorResponse(spec.status());
  const Status quota = CheckQuota(*spec);
  if (!quota.ok()) {
    return quota.code() == StatusCode::kResourceExhausted ? ErrorResponse(quota)
                                                          : RegistryErrorResponse(quota);
  }
  const Result<FunctionRecord> record = registry_.CreateFunction(tenant, FunctionSpecToYaml(*spec));
  if (!record.ok()) return RegistryErrorResponse(record.status());
  Replan();  // the borrowers give its room back before its instance starts
  // Undoes the write, unless a later change of the function made the record another's.
  const auto undo = [this, tenant, name = spec->name,
                     written = record->spec_yaml]() REQUIRES(change_mutex_) {
    const Result<FunctionRecord> now = registry_.GetFunction(tenant, name);
    if (!now.ok() || now->spec_yaml != written) return;
    const Status undone = registry_.DeleteFunction(tenant, name);
    if (!undone.ok()) {
      spdlog::error("function {}/{} failed to deploy and stays in the registry: {}", tenant, name,
                    undone.ToString());
    }
    Replan();
  };
  const Status taken = deployer_.Deploy(
      *spec, ThenOnWorker(job.responder, [this, undo, tenant, record = *record](
                                             const Status& settled) REQUIRES(change_mutex_) {
        if (settled.code() == StatusCode::kCancelled) {
          return JsonErrorResponse(
              409, fmt::format("function '{}': a later change superseded this one", record.name));
        }
        if (!settled.ok()) {
          undo();
          return ErrorResponse(settled);
        }
        spdlog::info("function {}/{} created", tenant, record.name);
        return JsonResponse(
            201, FunctionJson(deployer_, record, KeptWarm(tenant, record.name), options_.data_dir));
      }));
  if (!taken.ok()) {
    undo();
    return ErrorResponse(taken);
  }
  return std::nullopt;  // answered when the deploy settles
}

ManagementApi::Answer ManagementApi::UpdateFunction(const Job& job) {
  const std::string& tenant = job.tenant;
  const std::string& name = job.name;
  const Result<FunctionRecord> old = registry_.GetFunction(tenant, name);
  if (old.status().code() == StatusCode::kNotFound) return FunctionNotFound(name);
  if (!old.ok()) return RegistryErrorResponse(old.status());
  const Result<FunctionSpec> spec = AdmitSpec(tenant, job.body, job.by_admin);
  if (!spec.ok()) return ErrorResponse(spec.status());
  if (spec->name != name) {
    return JsonErrorResponse(
        400, fmt::format("the request body: name: '{}' is not the function being updated, '{}'",
                         spec->name, name));
  }
  const Status quota = CheckQuota(*spec);
  if (!quota.ok()) {
    return quota.code() == StatusCode::kResourceExhausted ? ErrorResponse(quota)
                                                          : RegistryErrorResponse(quota);
  }
  const Result<FunctionRecord> record =
      registry_.UpdateFunction(tenant, name, FunctionSpecToYaml(*spec));
  if (!record.ok()) return RegistryErrorResponse(record.status());
  Replan();
  // The old spec goes back into the registry and onto the node, so the function is what it was
  // before the request (its updated time excepted); unless a later change wrote it since.
  const auto undo = [this, tenant, name, written = record->spec_yaml,
                     old_yaml = old->spec_yaml]() REQUIRES(change_mutex_) {
    const Result<FunctionRecord> now = registry_.GetFunction(tenant, name);
    if (!now.ok() || now->spec_yaml != written) return;
    Status restored = registry_.UpdateFunction(tenant, name, old_yaml).status();
    if (restored.ok()) {
      Result<FunctionSpec> old_spec = ParseFunctionEntry(old_yaml, "the registry", tenant);
      restored = old_spec.ok() ? deployer_.Deploy(*old_spec, {}) : old_spec.status();
    }
    if (!restored.ok()) {
      spdlog::error(
          "function {}/{}: the new spec failed to deploy and the old one could not be "
          "restored: {}",
          tenant, name, restored.ToString());
    }
    Replan();
  };
  const Status taken = deployer_.Deploy(
      *spec, ThenOnWorker(job.responder, [this, undo, tenant, record = *record](
                                             const Status& settled) REQUIRES(change_mutex_) {
        if (settled.code() == StatusCode::kCancelled) {
          return JsonErrorResponse(
              409, fmt::format("function '{}': a later change superseded this one", record.name));
        }
        if (!settled.ok()) {
          undo();
          return ErrorResponse(settled);
        }
        spdlog::info("function {}/{} updated", tenant, record.name);
        return JsonResponse(
            200, FunctionJson(deployer_, record, KeptWarm(tenant, record.name), options_.data_dir));
      }));
  if (!taken.ok()) {
    undo();
    return ErrorResponse(taken);
  }
  return std::nullopt;  // answered when the deploy settles
}

HttpResponse ManagementApi::DeleteFunction(const std::string& tenant, const std::string& name) {
  const Status removed = registry_.DeleteFunction(tenant, name);
  if (removed.code() == StatusCode::kNotFound) return FunctionNotFound(name);
  if (!removed.ok()) return RegistryErrorResponse(removed);
  const Status undeployed = deployer_.Undeploy(tenant, name);
  if (!undeployed.ok() && undeployed.code() != StatusCode::kNotFound) {
    spdlog::error("function {}/{} is removed from the registry but still deployed: {}", tenant,
                  name, undeployed.ToString());
    return JsonErrorResponse(
        HttpStatusFor(undeployed.code()),
        fmt::format("function '{}' is removed, but the node could not stop it: {}", name,
                    undeployed.message()));
  }
  Replan();
  spdlog::info("function {}/{} deleted", tenant, name);
  return NoContent();
}

HttpResponse ManagementApi::RepositoryIndex(const std::string& tenant, std::string_view body) {
  bool ready_only = false;
  if (!body.empty()) {
    const Result<json> parsed = ParseJsonBody(body);
    if (!parsed.ok()) return ErrorResponse(parsed.status());
    if (!parsed->is_object()) {
      return JsonErrorResponse(400, "the request body is not a JSON object");
    }
    if (parsed->contains("ready")) {
      const json& ready = parsed->at("ready");
      if (!ready.is_boolean()) return JsonErrorResponse(400, "'ready' is not a boolean");
      ready_only = ready.get<bool>();
    }
  }
  const Result<std::vector<FunctionRecord>> records = registry_.ListFunctions(tenant);
  if (!records.ok()) return RegistryErrorResponse(records.status());
  json models = json::array();
  for (const FunctionRecord& record : *records) {
    const ModelStatus model = StatusOrUnavailable(deployer_, tenant, record.name);
    if (ready_only && model.state != ModelState::kReady) continue;
    models.push_back({{"name", record.name},
                      {"version", kModelVersion},
                      {"state", ModelStateName(model.state)},
                      {"reason", model.reason}});
  }
  return JsonResponse(200, models);
}

ManagementApi::Answer ManagementApi::LoadOrUnload(const Job& job, bool load) {
  const std::string& tenant = job.tenant;
  const std::string& name = job.name;
  const Result<FunctionRecord> record = registry_.GetFunction(tenant, name);
  if (record.status().code() == StatusCode::kNotFound) return ModelNotFound(name);
  if (!record.ok()) return RegistryErrorResponse(record.status());
  if (!job.body.empty()) {
    const Result<json> parsed = ParseJsonBody(job.body);
    if (!parsed.ok()) return ErrorResponse(parsed.status());
    if (!parsed->is_object()) {
      return JsonErrorResponse(400, "the request body is not a JSON object");
    }
    // What clients send by default is taken: no parameters, an empty object, and for an unload
    // `unload_dependents` (a function has no dependents). A configuration or files are not.
    if (const auto parameters = parsed->find("parameters"); parameters != parsed->end()) {
      if (!parameters->is_object() && !parameters->is_null()) {
        return JsonErrorResponse(400, "'parameters' is not an object");
      }
      const json& given = *parameters;
      for (auto it = given.begin(); given.is_object() && it != given.end(); ++it) {
        const std::string& key = it.key();
        if (!load && key == "unload_dependents" && it.value().is_boolean()) continue;
        return JsonErrorResponse(
            400, fmt::format("{} parameter '{}' is not supported (a configuration or files given "
                             "with the request); change a function's spec with PUT "
                             "/api/v1/functions/{{name}}",
                             load ? "load" : "unload", key));
      }
    }
  }
  if (!load) {
    const Status done = deployer_.Unload(tenant, name);
    if (done.code() == StatusCode::kNotFound) return ModelNotFound(name);
    if (!done.ok()) return ErrorResponse(done);
    spdlog::info("function {}/{} unloaded", tenant, name);
    return JsonResponse(200, json::object());
  }
  const Status taken = deployer_.Load(
      tenant, name, ThenOnWorker(job.responder, [tenant, name](const Status& settled) {
        if (settled.code() == StatusCode::kCancelled) {
          return JsonErrorResponse(
              409, fmt::format("model '{}': a later change superseded this load", name));
        }
        if (!settled.ok()) return ErrorResponse(settled);
        spdlog::info("function {}/{} loaded", tenant, name);
        return JsonResponse(200, json::object());
      }));
  if (taken.code() == StatusCode::kNotFound) return ModelNotFound(name);
  if (!taken.ok()) return ErrorResponse(taken);
  return std::nullopt;  // answered when the load settles
}

HttpResponse ManagementApi::ListTenants() {
  const Result<std::vector<TenantRecord>> tenants = registry_.ListTenants();
  if (!tenants.ok()) return RegistryErrorResponse(tenants.status());
  json list = json::array();
  for (const TenantRecord& tenant : *tenants) list.push_back(TenantJson(tenant));
  return JsonResponse(200, {{"tenants", std::move(list)}});
}

HttpResponse ManagementApi::GetTenant(const std::string& tenant) {
  const Result<TenantRecord> record = registry_.GetTenant(tenant);
  if (!record.ok()) return RegistryErrorResponse(record.status());
  return JsonResponse(200, TenantJson(*record));
}

HttpResponse ManagementApi::AddTenant(std::string_view body) {
  const Result<json> parsed = ParseJsonBody(body);
  if (!parsed.ok()) return ErrorResponse(parsed.status());
  if (!parsed->is_object() || !parsed->contains("name") || !parsed->at("name").is_string()) {
    return JsonErrorResponse(400, "the request body is not {\"name\": \"<tenant>\"}");
  }
  const std::string name = parsed->at("name").get<std::string>();
  const Result<std::string> key = keys_.AddTenant(name);
  if (!key.ok()) return RegistryErrorResponse(key.status());
  if (const Result<TenantRecord> added = registry_.GetTenant(name); added.ok()) {
    tenant_numbers_[name] = added->number;
  }
  spdlog::info("tenant {} added", name);
  return JsonResponse(201, {{"name", name}, {"key", *key}});
}

HttpResponse ManagementApi::RemoveTenant(const std::string& tenant) {
  const Result<std::vector<FunctionRecord>> records = registry_.ListFunctions(tenant);
  if (!records.ok()) return RegistryErrorResponse(records.status());
  // Its functions stop first, without drain: when the node cannot stop them the tenant is kept,
  // and its removal can be asked again.
  const Result<std::size_t> stopped = deployer_.StopTenant(tenant);
  if (!stopped.ok()) {
    spdlog::error("tenant {}: its functions could not be stopped: {}", tenant,
                  stopped.status().ToString());
    return JsonErrorResponse(HttpStatusFor(stopped.status().code()),
                             fmt::format("tenant '{}' is kept: its functions could not be "
                                         "stopped: {}",
                                         tenant, stopped.status().message()));
  }
  const Status removed = keys_.RemoveTenant(tenant);
  if (!removed.ok()) return RegistryErrorResponse(removed);
  tenant_numbers_.erase(tenant);
  Replan();
  RemoveModelFolder(tenant);
  spdlog::info("tenant {} removed with its {} function(s)", tenant, records->size());
  return NoContent();
}

void ManagementApi::RemoveModelFolder(const std::string& tenant) const {
  if (options_.files != nullptr) options_.files->RemoveTenant(tenant);  // and its digests
  deployer_.RemoveLogs(tenant);
  std::error_code error;
  std::filesystem::remove_all(options_.data_dir / "models" / tenant, error);
  if (error) {
    spdlog::error("tenant {} removed, but its model folder was not: {}", tenant, error.message());
  }
}

void ManagementApi::RegistryChanged() {
  MutexLock lock(queue_mutex_);
  if (stopping_) return;
  reconcile_pending_ = true;  // several changes before the worker gets to it: one reload
  queue_changed_.NotifyOne();
}

void ManagementApi::Reconcile() {
  MutexLock change(change_mutex_);
  // Keys first: a removed tenant's key is refused, an added one's accepted, from here on.
  if (const Status reloaded = keys_.Reload(); !reloaded.ok()) {
    spdlog::error("the registry changed, and its keys could not be read again: {}",
                  reloaded.ToString());
  } else {
    const Result<std::vector<TenantRecord>> tenants = registry_.ListTenants();
    if (!tenants.ok()) {
      spdlog::error("the registry changed, and its tenants could not be listed: {}",
                    tenants.status().ToString());
    } else {
      // A tenant is the same one while its name keeps its number: one removed and added again
      // between two polls is a new tenant, and the old one's functions stop all the same.
      std::map<std::string, std::int64_t> present;
      for (const TenantRecord& tenant : *tenants) present.emplace(tenant.name, tenant.number);
      for (const std::string& tenant : deployer_.Tenants()) {
        const auto now = present.find(tenant);
        const auto before = tenant_numbers_.find(tenant);
        if (now != present.end() &&
            (before == tenant_numbers_.end() || before->second == now->second)) {
          continue;
        }
        const Result<std::size_t> stopped = deployer_.StopTenant(tenant);
        if (!stopped.ok()) {
          spdlog::error(
              "tenant {} was removed from the registry; its functions could not be "
              "stopped: {}",
              tenant, stopped.status().ToString());
          continue;
        }
        if (now == present.end()) RemoveModelFolder(tenant);  // a new tenant's is its own
        spdlog::info("tenant {} was removed from the registry: its {} function(s) stopped", tenant,
                     *stopped);
      }
      tenant_numbers_ = std::move(present);
      Replan();
    }
  }
  MutexLock lock(queue_mutex_);
  ++reconciled_;
  reconciled_changed_.NotifyAll();
}

bool ManagementApi::WaitUntilReconciled(std::uint64_t count, std::chrono::milliseconds timeout) {
  MutexLock lock(queue_mutex_);
  return reconciled_changed_.WaitFor(queue_mutex_, timeout,
                                     [&]() REQUIRES(queue_mutex_) { return reconciled_ >= count; });
}

std::size_t ManagementApi::queued() const {
  MutexLock lock(queue_mutex_);
  return queue_.size();
}

std::uint64_t ManagementApi::reconciled() const {
  MutexLock lock(queue_mutex_);
  return reconciled_;
}

HttpResponse ManagementApi::RotateKey(const std::string& tenant) {
  const Result<std::string> key = keys_.RotateKey(tenant);
  if (!key.ok()) return RegistryErrorResponse(key.status());
  spdlog::info("tenant {} has a new key", tenant);
  return JsonResponse(200, {{"name", tenant}, {"key", *key}});
}

Result<std::size_t> ManagementApi::DeployAll() {
  MutexLock change(change_mutex_);
  GSHARE_ASSIGN_OR_RETURN(const std::vector<TenantRecord> tenants, registry_.ListTenants());
  for (const TenantRecord& tenant : tenants) tenant_numbers_[tenant.name] = tenant.number;
  Replan();  // cold functions start no instance ahead of need
  // Loads run in parallel, at most kParallelLoads at once; every one has settled on return.
  struct Loads {
    Mutex mutex;
    CondVar changed;
    int loading GUARDED_BY(mutex) = 0;
    std::size_t deployed GUARDED_BY(mutex) = 0;
  };
  auto loads = std::make_shared<Loads>();
  for (const TenantRecord& tenant : tenants) {
    const Result<std::vector<FunctionRecord>> records = registry_.ListFunctions(tenant.name);
    if (!records.ok()) {
      // Removed since the list was read (by `gshare tenant` beside the server), or unreadable.
      spdlog::warn("the functions of tenant {} are not deployed: {}", tenant.name,
                   records.status().ToString());
      continue;
    }
    for (const FunctionRecord& record : *records) {
      Result<FunctionSpec> spec = ParseFunctionEntry(
          record.spec_yaml, fmt::format("the registry's {}/{}", record.tenant, record.name),
          record.tenant);
      {
        MutexLock lock(loads->mutex);
        loads->changed.Wait(
            loads->mutex, [&]() REQUIRES(loads->mutex) { return loads->loading < kParallelLoads; });
        ++loads->loading;
      }
      const std::string what = fmt::format("{}/{}", record.tenant, record.name);
      const auto settled = [loads, what](const Status& status) {
        if (!status.ok()) spdlog::error("function {} is not deployed: {}", what, status.ToString());
        MutexLock lock(loads->mutex);
        --loads->loading;
        if (status.ok()) ++loads->deployed;
        loads->changed.NotifyAll();
      };
      const Status taken = spec.ok() ? deployer_.Deploy(*spec, settled) : spec.status();
      if (!taken.ok()) settled(taken);
    }
  }
  MutexLock lock(loads->mutex);
  loads->changed.Wait(loads->mutex, [&]() REQUIRES(loads->mutex) { return loads->loading == 0; });
  return loads->deployed;
}

}  // namespace gshare::serve
