// A function process for the lifecycle tests: serves the readiness check of the function protocol
// on $GSHARE_SOCKET and a few test routes; it never touches device memory.
//   lifecycle_test_function [--never-ready] [--crash-at-start] [--ignore-sigterm] [--stop-parent]
//                           [--symlink-socket] [--rebind-socket]
// --symlink-socket: serves on another path and puts a symlink to it where the node looks, as a
// hostile function might point the node at someone else's socket.
// --rebind-socket: answers its first readiness check 503, then closes its socket and serves on a
// new one at the same path, as a loader that serves "not ready" first may.
// --stop-parent: stops its parent (SIGSTOP, over and over), as a hostile program may stop its init.
// GET /v2/health/ready: 200, or 503 with --never-ready or after POST /test/unhealthy.
// GET /test/identity: "<uid> <gid> <dumpable> <fd 3 is a socket: 0|1>".
// POST /test/crash: exits with status 3 at once, without answering.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "gshare/net/unix_http.h"

int main(int argc, char** argv) {
  bool never_ready = false;
  bool ignore_sigterm = false;
  bool stop_parent = false;
  bool symlink_socket = false;
  bool rebind_socket = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rebind-socket") == 0) rebind_socket = true;
    if (std::strcmp(argv[i], "--symlink-socket") == 0) symlink_socket = true;
    if (std::strcmp(argv[i], "--never-ready") == 0) never_ready = true;
    if (std::strcmp(argv[i], "--crash-at-start") == 0) return 4;
    if (std::strcmp(argv[i], "--ignore-sigterm") == 0) ignore_sigterm = true;
    if (std::strcmp(argv[i], "--stop-parent") == 0) stop_parent = true;
  }
  const char* given_path = std::getenv("GSHARE_SOCKET");
  if (given_path == nullptr) {
    std::fprintf(stderr, "GSHARE_SOCKET is not set\n");
    return 2;
  }
  const std::string served = std::string(given_path) + (symlink_socket ? ".real" : "");
  const char* socket_path = served.c_str();
  // What a function does first: exec made it dumpable again.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // SIGTERM is waited for below (or ignored); blocked before the server's thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  if (ignore_sigterm) {
    ::signal(SIGTERM, SIG_IGN);
  } else {
    ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  }

  std::atomic<bool> unhealthy = never_ready || rebind_socket;
  std::mutex asked_mutex;
  std::condition_variable asked_changed;
  bool asked = false;  // the first readiness check came (--rebind-socket)
  const gshare::net::UnixHttpServer::Handler handler =
      [&](const gshare::net::HttpRequest& request) -> gshare::net::HttpResponse {
    if (request.target == "/v2/health/ready") {
      const bool answer_unhealthy = unhealthy;
      {
        std::lock_guard lock(asked_mutex);
        asked = true;
      }
      asked_changed.notify_all();
      return {answer_unhealthy ? 503 : 200, "{}", "application/json"};
    }
    if (request.method == "POST" && request.target == "/test/unhealthy") {
      unhealthy = true;
      return {200, "{}", "application/json"};
    }
    if (request.method == "POST" && request.target == "/test/crash") std::_Exit(3);
    if (request.target == "/test/identity") {
      struct stat info {};
      const bool control = ::fstat(3, &info) == 0 && S_ISSOCK(info.st_mode);
      return {200,
              std::to_string(::getuid()) + " " + std::to_string(::getgid()) + " " +
                  std::to_string(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)) + " " +
                  (control ? "1" : "0"),
              "text/plain"};
    }
    return {404, "{\"error\": \"not found\"}", "application/json"};
  };
  auto server = gshare::net::UnixHttpServer::Start(socket_path, handler);
  if (rebind_socket && server.ok()) {
    std::unique_lock lock(asked_mutex);
    asked_changed.wait(lock, [&] { return asked; });
    lock.unlock();
    server->reset();  // closes and removes the first socket
    unhealthy = false;
    server = gshare::net::UnixHttpServer::Start(socket_path, handler);
  }
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  if (symlink_socket && ::symlink(socket_path, given_path) != 0) return 5;
  if (stop_parent) {
    const pid_t parent = ::getppid();
    for (;;) {
      ::kill(parent, SIGSTOP);
      ::usleep(200);
    }
  }
  if (ignore_sigterm) {
    for (;;) ::pause();
  }
  int received = 0;
  ::sigwait(&signals, &received);
  return 0;
}
