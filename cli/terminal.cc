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

}  // namespace trainrx::cli
