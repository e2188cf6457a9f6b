// Status and Result<T>: the error values of gshare.
//
// Every operation that can fail at run time returns a Status (no value) or a Result<T> (a value
// or an error). Neither throws. A Status is cheap to copy when OK; an error carries a code and a
// human-readable message that names what failed (a file and line, a function, a GPU).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gshare {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is malformed (bad flag, bad file content)
  kNotFound,            // a named thing does not exist (file, function, GPU)
  kAlreadyExists,       // a unique name is taken
  kOutOfRange,          // a value is outside what the system can represent or hold
  kResourceExhausted,   // a quota or capacity would be exceeded (GPU memory, slice quota)
  kFailedPrecondition,  // the system is not in a state where the operation is allowed
  kUnavailable,         // a device or service is not present here (no NVIDIA driver, say)
  kCancelled,           // the operation was cancelled by its caller
  kDeadlineExceeded,    // a time limit ran out
  kInternal,            // a broken invariant: a bug in gshare
  kIo,                  // the operating system refused a file or socket operation
  kPermissionDenied,    // the caller may not do this (a tenant's key on an admin's operation)
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: trace.csv:12: column 'timestamp' is not a number".
  std::string ToString() const;

  // Returns this status with `context` prepended to the message ("loading catalog: ...").
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}

// A value of type T or an error Status. Constructing from an OK Status is a bug (asserted).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "Result constructed from an OK status");
    if (status_.ok()) status_ = Internal("Result constructed from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace gshare

// Returns early from the enclosing function when `expr` (a Status) is an error.
#define GSHARE_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::gshare::Status gshare_status_ = (expr);        \
    if (!gshare_status_.ok()) return gshare_status_; \
  } while (false)

#define GSHARE_CONCAT_INNER(a, b) a##b
#define GSHARE_CONCAT(a, b) GSHARE_CONCAT_INNER(a, b)

// `GSHARE_ASSIGN_OR_RETURN(auto x, F());` declares x from F()'s value or returns F()'s error.
#define GSHARE_ASSIGN_OR_RETURN(lhs, expr)                   \
  auto GSHARE_CONCAT(gshare_result_, __LINE__) = (expr);     \
  if (!GSHARE_CONCAT(gshare_result_, __LINE__).ok())         \
    return GSHARE_CONCAT(gshare_result_, __LINE__).status(); \
  lhs = std::move(GSHARE_CONCAT(gshare_result_, __LINE__)).value()
