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
  return status.kind() == ErrorKind::kInternal ? FailInternal(status.message()) : Fail(status.message());
}

int FailInternal(std::string_view what) {
  std::cerr << "trainrx: internal error: " << what << " (a bug in trainrx: please report it with the command)\n";
  return kExitInternalError;
}

}  // namespace trainrx::cli
