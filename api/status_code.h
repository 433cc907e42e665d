// How the C API (include/trainrx/c_api.h) says a failure: a code the caller gets back and a
// malloc'd message in *error (freed with trainrx_string_free). The codes are the command's exit
// codes (cli/terminal.h) so that the Python package raises with the CLI's code: 2 for input the
// caller gave that is wrong, 70 for a bug in trainrx. The one mapping of a library Status's kind
// (profiler/status.h) to a C API code; c_api.cc and tests/api/c_api_test.cc include it.
// Private to api/; header-only, no state: safe on any thread.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include "trainrx/profiler/status.h"

namespace trainrx::api {

inline constexpr int kInputError = 2;  // the CLI's exit code for bad input
inline constexpr int kInternalError = 70;

// A malloc'd copy of `s` (freed with trainrx_string_free), or nullptr when out of memory.
inline char* CopyOut(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// Sets *error (when `error` is not NULL) to `message` and returns `code`.
inline int SetError(char** error, const std::string& message, int code) {
  if (error) *error = CopyOut(message);
  return code;
}

// A bug: "trainrx: internal error: WHAT (a bug in trainrx: please report it)", kInternalError.
inline int InternalError(char** error, const std::string& what) {
  return SetError(error, "trainrx: internal error: " + what + " (a bug in trainrx: please report it)", kInternalError);
}

// A library's error by its kind: kInvalidInput -> kInputError with the message as it is,
// kInternal -> InternalError. An ok Status passed here is a bug too.
inline int SetError(char** error, const Status& status) {
  if (status.ok()) return InternalError(error, "an ok Status reported as an error");
  switch (status.kind()) {  // no default: a new kind must choose its code here (-Wswitch)
    case ErrorKind::kInvalidInput: return SetError(error, status.message(), kInputError);
    case ErrorKind::kInternal: return InternalError(error, status.message());
  }
  return InternalError(error, status.message());  // not reached: every kind is a case above
}

}  // namespace trainrx::api
