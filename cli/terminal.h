// The exit codes of trainrx's subcommands, and the one way an error is said.
//
// Every error is one line on stderr, in one shape (issue 35.5):
//   trainrx: error: SUBJECT: WHAT
// SUBJECT is what the user gave that is wrong, as given: a file (and the place in it, where the
// message names one), an option ("--format"), a knob or a spec ("'nosuch=1'"), or the command
// ("analyze", "gate check"); WHAT says what was wrong and what was expected. A list to choose from
// follows on indented lines (`--threshold unknown=1` lists the thresholds). Exit code by class:
// kExitInputError for usage and input errors, 70 (EX_SOFTWARE) for a bug ("trainrx: internal error:").
// tests/e2e/errors_test.sh runs a sample of bad inputs across the commands against this shape.
#pragma once

#include <string>
#include <string_view>

#include "trainrx/profiler/status.h"

namespace trainrx::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFail = 1;          // gate: regression
inline constexpr int kExitInputError = 2;    // usage, input or a trial that failed
inline constexpr int kExitInconclusive = 3;  // gate
inline constexpr int kExitInternalError = 70;

// A library's message, which starts with its own subject ("run.json: not a JSON trace: expected
// '{' ... at byte 0, found 'n'"): prints "trainrx: error: MESSAGE", returns kExitInputError.
int Fail(const std::string& message);
// The CLI's own: "trainrx: error: SUBJECT: WHAT".
int Fail(std::string_view subject, std::string_view what);
// A library's Status by its kind (profiler/status.h): kInvalidInput as Fail(message), exit 2;
// kInternal as FailInternal(message), exit 70 (an ok Status passed here is a bug too: 70).
// The one mapping of kinds to exit codes in the command (tests/cli/terminal_test.cc).
int Fail(const Status& status);
// A bug: "trainrx: internal error: WHAT (a bug in trainrx: please report it with the command)",
// returns kExitInternalError.
int FailInternal(std::string_view what);

}  // namespace trainrx::cli
