#include "terminal.h"

#include <iostream>

namespace trainrx::cli {

int Fail(const std::string& msg) {
  std::cerr << "trainrx: error: " << msg << "\n";
  return kExitInputError;
}

}  // namespace trainrx::cli
