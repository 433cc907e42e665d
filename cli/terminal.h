// The exit codes of trainrx's subcommands, and the one way an error is said (exit 2).
#pragma once

#include <string>

namespace trainrx::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFail = 1;          // gate: regression
inline constexpr int kExitInputError = 2;    // usage, input or a trial that failed
inline constexpr int kExitInconclusive = 3;  // gate

// Prints "trainrx: error: MSG" and returns kExitInputError.
int Fail(const std::string& msg);

}  // namespace trainrx::cli
