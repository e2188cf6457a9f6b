// The ManagementApi's endpoints over files of the node (management_api.h): a tenant's model files,
// stored by its ModelFileStore (model_files.h), and its functions' logs, read by the deployer.
// docs/serve.md, "Model files" and "Function logs", describe them.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "gshare/common/units.h"
#include "gshare/model/catalog.h"
#include "gshare/serve/http_util.h"
#include "gshare/serve/management_api.h"

namespace gshare::serve {
namespace {

using net::HttpResponse;
using net::JsonErrorResponse;
using nlohmann::json;

json FileJson(const ModelFileInfo& file) {
  return {{"name", file.name}, {"size", file.size}, {"sha256", file.sha256}};
}

// The answer for an error of the store: its own failures were logged where they happened and
// say only that the node failed.
HttpResponse FileErrorResponse(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOutOfRange:
      return JsonErrorResponse(413, status.message());
    case StatusCode::kFailedPrecondition:
      return JsonErrorResponse(409, status.message());
    default:
      break;
  }
  const int http_status = HttpStatusFor(status.code());
  if (http_status < 500) return JsonErrorResponse(http_status, status.message());
  // The node's own failure: its detail (paths) is for the log.
  spdlog::error("files: {}", status.ToString());
  return JsonErrorResponse(http_status, "the node could not carry out the file operation");
}

}  // namespace

Result<std::shared_ptr<ModelFileUpload>> ManagementApi::BeginUpload(
    const std::string& tenant, const std::string& name, std::optional<std::uint64_t> declared,
    HttpResponse& refusal) const {
  auto upload = options_.files->BeginUpload(tenant, name, declared);
  if (!upload.ok()) refusal = FileErrorResponse(upload.status());
  return upload;
}

Result<std::optional<std::string>> ManagementApi::FunctionNaming(const std::string& tenant,
                                                                 const std::string& name) {
  GSHARE_ASSIGN_OR_RETURN(const std::vector<FunctionRecord> records,
                          registry_.ListFunctions(tenant));
  const auto folder = options_.data_dir / "models" / tenant;
  const auto path = options_.files->PathOf(tenant, name).lexically_normal();
  for (const FunctionRecord& record : records) {
    Result<FunctionSpec> spec = ParseFunctionEntry(
        record.spec_yaml, fmt::format("the registry's {}/{}", record.tenant, record.name),
        record.tenant, folder);
    if (!spec.ok()) return Internal(spec.status().message());
    for (const std::string& file : spec->model_files) {
      if (std::filesystem::path(file).lexically_normal() == path) {
        return std::optional<std::string>(record.name);
      }
    }
  }
  return std::optional<std::string>();
}

HttpResponse ManagementApi::ListFiles(const std::string& tenant) {
  auto files = options_.files->List(tenant);
  if (!files.ok()) return FileErrorResponse(files.status());
  json listed = json::array();
  for (const ModelFileInfo& file : *files) listed.push_back(FileJson(file));
  return JsonResponse(200, {{"files", std::move(listed)},
                            {"stored_bytes", options_.files->StoredBytes(tenant)},
                            {"storage_bytes", options_.files->options().tenant_storage_bytes}});
}

HttpResponse ManagementApi::GetFile(const std::string& tenant, const std::string& name) {
  auto file = options_.files->Find(tenant, name);
  if (!file.ok()) return FileErrorResponse(file.status());
  return JsonResponse(200, FileJson(*file));
}

HttpResponse ManagementApi::PutFile(const Job& job) {
  auto naming = FunctionNaming(job.tenant, job.name);
  if (!naming.ok()) return RegistryErrorResponse(naming.status());
  if (naming->has_value()) {
    return JsonErrorResponse(
        409, fmt::format("file '{}' is named by function '{}': deploy it without the file (or "
                         "delete it) before replacing the file; nothing was kept",
                         job.name, **naming));
  }
  auto committed = options_.files->Commit(*job.upload);
  if (!committed.ok()) return FileErrorResponse(committed.status());
  spdlog::info("tenant {}: file {} stored ({}, sha256 {})", job.tenant, job.name,
               FormatBytes(committed->info.size), committed->info.sha256);
  return JsonResponse(committed->replaced ? 200 : 201, FileJson(committed->info));
}

HttpResponse ManagementApi::DeleteFile(const std::string& tenant, const std::string& name) {
  auto naming = FunctionNaming(tenant, name);
  if (!naming.ok()) return RegistryErrorResponse(naming.status());
  if (naming->has_value()) {
    return JsonErrorResponse(
        409, fmt::format("file '{}' is named by function '{}': deploy it without the file (or "
                         "delete it) first",
                         name, **naming));
  }
  const Status deleted = options_.files->Delete(tenant, name);
  if (!deleted.ok()) return FileErrorResponse(deleted);
  return {.status = 204, .body = ""};
}

HttpResponse ManagementApi::FunctionLogs(const std::string& tenant, const std::string& name,
                                         std::size_t lines) {
  // Another tenant's function is no function here: the same answer as for an unknown name.
  const std::string not_found = "function '" + name + "' not found";
  auto log = deployer_.LogOf(tenant, name, lines);
  if (!log.ok()) {
    if (log.status().code() == StatusCode::kNotFound) return JsonErrorResponse(404, not_found);
    spdlog::error("management API: the log of {}/{}: {}", tenant, name, log.status().ToString());
    return JsonErrorResponse(500, "the function's log could not be read");
  }
  std::string text;
  for (const std::string& line : *log) {
    text += line;
    text += '\n';
  }
  return {.status = 200, .body = std::move(text), .content_type = "text/plain; charset=utf-8"};
}

}  // namespace gshare::serve
