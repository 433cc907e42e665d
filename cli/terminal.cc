#include "terminal.h"

#include <iostream>

namespace trainrx::cli {

int Fail(const std::string& message) {
  std::cerr << "trainrx: error: " << message << "\n";
  return kExitInputError;
}

int Fail(std::string_view subject, std::string_view what) {
  std::cerr << "trainrx: error: " << subject << ": " << what << "\n";
  return kExitInputError;
}

int Fail(const Status& status) {
  if (status.ok()) return FailInternal("an ok Status reported as an error");
  switch (status.kind()) {  // no default: a new kind must choose its exit code here (-Wswitch)
    case ErrorKind::kInvalidInput: return Fail(status.message());
    case ErrorKind::kInternal: return FailInternal(status.message());
  }
  return FailInternal(status.message());  // not reached: every kind is a case above
}

int FailInternal(std::string_view what) {
  std::cerr << "trainrx: internal error: " << what << " (a bug in trainrx: please report it with the command)\n";
  return kExitInternalError;
}

}  // namespace trainrx::cli
