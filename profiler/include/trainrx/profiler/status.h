// trainrx::Status and StatusOr<T> — the one error style of trainrx's library code, as
// Perfetto's base::Status / StatusOr and Kineto's error returns do it.
//
// A fallible library call returns a Status (nothing else to return) or a StatusOr<T> (the value,
// or why there is none). An error carries a message a user can act on, starting with its own
// subject ("run.json: not a JSON trace: expected '{' ... at byte 0, found 'n'"), and a kind:
//   kInvalidInput  what the user gave is wrong or cannot be used: a file (unreadable, not a trace,
//                  of another job), an option value, a spec, an output that cannot be written.
//                  The command says it as "trainrx: error: MESSAGE" and exits 2.
//   kInternal      a bug in trainrx (a broken invariant): "trainrx: internal error: ..." and exit 70.
// The mapping to exit codes is the CLI's (cli/terminal.h); the library only says which kind.
// Data a trace gets wrong inside is not an error: it is counted in Trace::stats (conventions).
//
// Example:
//   StatusOr<std::vector<std::string>> files = ExpandTracePaths({"runs/"});
//   if (!files.ok()) return files.status();   // "runs/: no such file or directory"
//   for (const auto& f : *files) ...
//
// Lowest layer (profiler/), header-only, torch-free; values, no shared state: safe on any thread.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace trainrx {

enum class ErrorKind {
  kInvalidInput,  // exit 2
  kInternal,      // exit 70
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(ErrorKind::kInvalidInput, std::move(message)); }
  static Status Internal(std::string message) { return Status(ErrorKind::kInternal, std::move(message)); }

  bool ok() const { return ok_; }
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }  // "" when ok

  // The bool + error-string form, for tests: ASSERT_TRUE(f().ToBool(&error)) << error. True when
  // ok, else false with *error set to the message.
  bool ToBool(std::string* error) const {
    if (!ok_ && error) *error = message_;
    return ok_;
  }

 private:
  Status(ErrorKind kind, std::string message) : ok_(false), kind_(kind), message_(std::move(message)) {}

  bool ok_ = true;
  ErrorKind kind_ = ErrorKind::kInvalidInput;
  std::string message_;
};

// A value, or the Status that says why there is none. Reading the value of an error is a bug:
// std::logic_error (the CLI says it as an internal error).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit, as `return value;` reads
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit, as `return Status::Error(...);`
    if (status_.ok()) status_ = Status::Internal("a StatusOr made from an ok Status, without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }  // ok() when there is a value

  const T& value() const& { return Checked(), *value_; }
  T& value() & { return Checked(), *value_; }
  T&& value() && { return Checked(), std::move(*value_); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void Checked() const {
    if (!value_) throw std::logic_error("the value of an error read: " + status_.message());
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace trainrx
