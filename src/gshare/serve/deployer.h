// Deployer: what function management changes on the node. The management API (management_api.h)
// writes the registry and tells the deployer; the server's deployer is the live backend, which
// serves what the registry holds (at start, every function in it). Tests give a fake.
//
// Order of a change: Admit (before anything is written), the registry write, then Deploy or
// Undeploy. A Deploy that fails after the write, at once or when it settles, is undone in the
// registry by the caller.
//
// Threading: every method may be called from any thread, concurrently; none blocks on a request
// or waits for a model to load: a deploy returns once the node has taken the change and reports
// how it ended through its `settled` callback.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/model/function_spec.h"

namespace gshare::serve {

// A deployed function's state, as the Triton repository index reports it.
enum class ModelState {
  kLoading,      // its first instance is starting; requests get 503 until it is ready
  kReady,        // requests are served
  kUnavailable,  // unloaded, or its instance failed to start (the reason says which)
};
std::string_view ModelStateName(ModelState state);  // "LOADING", "READY", "UNAVAILABLE"

struct ModelStatus {
  ModelState state = ModelState::kUnavailable;
  std::string reason;  // why it is unavailable; empty otherwise
};

class Deployer {
 public:
  // How a deploy (or a load) ended, called once, from any thread, never inside the call that
  // took it: OK once the new version serves (its first instance is ready); the error that kept it
  // from starting; Cancelled when a later change of the function superseded it (the later change
  // decides what the function is); Unavailable when the server shut down first.
  using Settled = std::function<void(Status)>;

  virtual ~Deployer() = default;

  // Whether `spec` may run on this node, checked before it is written. `by_admin`: the admin key
  // asks. A spec with `command` (arbitrary code on the node) is the admin's only: PermissionDenied
  // for a tenant. InvalidArgument when the node cannot run it (a runtime not installed here, a
  // model file that is not a readable regular file inside the tenant's model folder).
  virtual Status Admit(const FunctionSpec& spec, bool by_admin) const = 0;
  // Serves `spec` (its tenant and name identify it): a new function, or a new spec for a deployed
  // one, whose requests in flight finish on the old spec. Returns once the node has taken the
  // change (an error: it did not, and `settled` is never called); a new function is kLoading
  // until its first instance is ready, and `settled` says how the change ended.
  virtual Status Deploy(const FunctionSpec& spec, Settled settled) = 0;
  // Stops serving the function: new requests get 404 at once, those in flight finish, then its
  // instances stop. NotFound when it is not deployed.
  virtual Status Undeploy(std::string_view tenant, std::string_view name) = 0;
  // Triton's load: makes an unloaded (or failed) function ready again, warming an instance;
  // `settled` as for Deploy (called with OK at once when it is loaded or loading already).
  // NotFound when it is not deployed.
  virtual Status Load(std::string_view tenant, std::string_view name, Settled settled) = 0;
  // Triton's unload: the function stays deployed but takes no requests (503) until loaded; its
  // instances stop once their requests are answered. NotFound when it is not deployed.
  virtual Status Unload(std::string_view tenant, std::string_view name) = 0;
  // NotFound when it is not deployed.
  virtual Result<ModelStatus> StatusOf(std::string_view tenant, std::string_view name) const = 0;
  // The last `lines` lines (oldest first) of the function's log, its instances' stdout and
  // stderr, as its tenant may read them (log_tail.h: no path, instance id or pid of the node).
  // The log of a function whose deploy failed (and so is no longer deployed) is served while the
  // node keeps it. NotFound when there is neither a log nor a deployed function of that name.
  // Reads a file: not for an io thread.
  virtual Result<std::vector<std::string>> LogOf(std::string_view tenant, std::string_view name,
                                                 std::size_t lines) const = 0;
  // Stops every function of `tenant` at once, without drain (the tenant is gone): each is
  // undeployed (new requests get 404), its requests that have not started are answered
  // Unavailable, and its instances stop once the running ones end. Returns how many it stopped
  // (0 when the tenant has none deployed).
  virtual Result<std::size_t> StopTenant(std::string_view tenant) = 0;
  // Whether the function keeps a warm instance in the node's snapshot pool (the default) or is
  // cold: its room in the pool was lent and is taken back (the management API's plan of the
  // pool, pool_plan.h). A cold function keeps no instance without work: its idle instances stop
  // at once, a request that finds none starts one, and a deploy of it (at the server's start, a
  // load) starts none ahead of need. Holds for the function's later deploys too, and may be told
  // before the function is deployed.
  virtual void KeepWarm(std::string_view tenant, std::string_view name, bool warm) = 0;
  // Removes what the node keeps of a removed tenant's functions' logs (after StopTenant), so that
  // a tenant added later under the name reads none of them.
  virtual void RemoveLogs(std::string_view tenant) = 0;
  // The tenants that have a function deployed, by name.
  virtual std::vector<std::string> Tenants() const = 0;
};

}  // namespace gshare::serve
