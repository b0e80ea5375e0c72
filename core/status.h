// Status and Expected<T>: the run-time error channel (STYLE.md §5).
//
// A Status is OK or carries a code and a message that says what was wrong and what to do.
// Expected<T> holds a T or a non-OK Status. Invariants use BRIGADE_CHECK (always on), never Status.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace brigade {

enum class StatusCode : int {
  ok = 0,
  invalid_argument,  // the caller asked for something impossible (bad parameter, bad ids)
  not_found,         // a file, tensor, request or name does not exist
  corrupt,           // data is malformed: truncated file, bad header, undecodable bytes
  unsupported,       // well-formed but not handled (unknown architecture, dtype)
  out_of_resources,  // KV pages, queue slots or memory ran out
  io_error,          // the operating system refused (open, read, mmap)
  cancelled,         // aborted by the client
  internal,          // a bug: an invariant that should have been caught earlier
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::ok; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: max_tokens must be >= 1 (got 0)".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::not_found, std::move(m)}; }
inline Status corrupt(std::string m) { return {StatusCode::corrupt, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::unsupported, std::move(m)}; }
inline Status out_of_resources(std::string m) { return {StatusCode::out_of_resources, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::io_error, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::internal, std::move(m)}; }

// A value or an error. Constructing from an OK Status is a bug.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).is_ok()) {
      std::fprintf(stderr, "brigade: Expected constructed from an OK Status\n");
      std::abort();
    }
  }

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // The error; OK when a value is held.
  Status status() const { return has_value() ? Status::ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void check_failed(const char* cond, const char* why, const char* file, int line);

}  // namespace brigade

// An invariant that must hold whatever the input; failing it is a bug, so the process stops.
#define BRIGADE_CHECK(cond, why)                                           \
  do {                                                                     \
    if (!(cond)) ::brigade::check_failed(#cond, (why), __FILE__, __LINE__); \
  } while (0)

// Propagates a non-OK Status from an expression returning Status.
#define BRIGADE_RETURN_IF_ERROR(expr)           \
  do {                                          \
    ::brigade::Status _st = (expr);             \
    if (!_st.is_ok()) return _st;               \
  } while (0)

#define BRIGADE_CONCAT_INNER(a, b) a##b
#define BRIGADE_CONCAT(a, b) BRIGADE_CONCAT_INNER(a, b)
// `BRIGADE_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
// (__LINE__ is expanded once, at the outer level: a multi-line invocation would otherwise give
// different numbers to the three uses of the temporary.)
#define BRIGADE_ASSIGN_OR_RETURN(lhs, expr) BRIGADE_ASSIGN_OR_RETURN_LINE(__LINE__, lhs, expr)
#define BRIGADE_ASSIGN_OR_RETURN_LINE(line, lhs, expr) \
  BRIGADE_ASSIGN_OR_RETURN_IMPL(BRIGADE_CONCAT(_exp_, line), lhs, expr)
#define BRIGADE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.has_value()) return tmp.status();          \
  lhs = std::move(tmp).value()
